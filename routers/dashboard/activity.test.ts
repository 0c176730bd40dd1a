import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import {
  bucketOfMetric,
  chatTurnActivity,
  LATENCY_BUCKETS,
  latencyBucket,
  latencyMetric,
  normaliseQuestion,
  quantileOf,
  upstreamErrorKind,
} from './activity.ts';

describe('latency histogram', () => {
  it('puts a latency in the bucket whose bound is the first at or above it', () => {
    expect(latencyBucket(0)).toBe(0);
    expect(latencyBucket(1)).toBe(0);
    expect(latencyBucket(1.2)).toBe(1);
    expect(latencyBucket(1.25)).toBe(1);
    expect(latencyBucket(1.26)).toBe(2);
    expect(latencyBucket(Number.NaN)).toBe(0);
    expect(latencyBucket(1e12)).toBe(LATENCY_BUCKETS - 1);
    expect(bucketOfMetric(latencyMetric(100))).toBe(latencyBucket(100));
    expect(bucketOfMetric('latency_b99')).toBeUndefined();
    expect(bucketOfMetric('messages')).toBeUndefined();
  });

  it('reads percentiles back within one bucket (25%) of the exact value', () => {
    fc.assert(
      fc.property(fc.array(fc.double({ min: 1.5, max: 60_000, noNaN: true }), { minLength: 1, maxLength: 300 }), fc.constantFrom(0.5, 0.95), (samples, q) => {
        const counts = new Array<number>(LATENCY_BUCKETS).fill(0);
        for (const s of samples) counts[latencyBucket(s)]! += 1;
        const sorted = [...samples].sort((x, y) => x - y);
        const exact = sorted[Math.max(0, Math.ceil(q * sorted.length) - 1)]!;
        const estimate = quantileOf(counts, q)!;
        expect(estimate).toBeGreaterThanOrEqual(exact / 1.25 - 0.01);
        expect(estimate).toBeLessThanOrEqual(exact * 1.25 + 0.01);
      }),
    );
  });

  it('has no percentile without calls', () => {
    expect(quantileOf(new Array(LATENCY_BUCKETS).fill(0), 0.5)).toBeNull();
  });
});

describe('chat turn activity', () => {
  const turn = {
    isNewSession: true,
    visitorKey: 's:abc',
    usage: { promptTokens: 12, completionTokens: 30 },
    knowledgeBase: true,
    grounded: false,
    question: '  Where IS   my order? ',
    latencyMs: 40,
  };

  it('counts the turn, its tokens, and a knowledge-base question with no good source', () => {
    expect(chatTurnActivity(turn)).toEqual({
      metrics: {
        conversations: 1,
        messages: 1,
        replies: 1,
        tokens_in: 12,
        tokens_out: 30,
        kb_queries: 1,
        unanswered: 1,
        upstream_calls: 1,
        [latencyMetric(40)]: 1,
      },
      visitor: 's:abc',
      question: 'where is my order?',
    });
  });

  it('an answered question, or an external endpoint, leaves no question', () => {
    expect(chatTurnActivity({ ...turn, grounded: true }).question).toBeUndefined();
    const external = chatTurnActivity({ ...turn, knowledgeBase: false, isNewSession: false });
    expect(external.question).toBeUndefined();
    expect(external.metrics).toMatchObject({ conversations: 0, kb_queries: 0, unanswered: 0 });
  });

  it('normalises questions for grouping and caps them', () => {
    expect(normaliseQuestion('A\tb\n\nC ')).toBe('a b c');
    expect(normaliseQuestion('x'.repeat(500))).toHaveLength(200);
  });

  it('folds upstream failure kinds into the monitoring kinds; the caller leaving is not a failure', () => {
    expect(upstreamErrorKind('connection_failed')).toBe('connection');
    expect(upstreamErrorKind('blocked')).toBe('connection');
    expect(upstreamErrorKind('timeout')).toBe('timeout');
    expect(upstreamErrorKind('invalid_response')).toBe('invalid_response');
    expect(upstreamErrorKind('auth_failed')).toBe('auth');
    expect(upstreamErrorKind('rate_limited')).toBe('http');
    expect(upstreamErrorKind('upstream_error')).toBe('http');
    expect(upstreamErrorKind('aborted')).toBeUndefined();
    expect(upstreamErrorKind('null')).toBeUndefined();
  });
});
