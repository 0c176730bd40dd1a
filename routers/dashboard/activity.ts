import type { ActivityMetric, UpstreamErrorKind } from '../../schema/dashboard.ts';

/**
 * What one event adds to the rollups: counters, the visitor seen (for unique counts) and the question left
 * without a good source. The database function count_activity applies it for today's UTC day.
 */
export interface Activity {
  metrics: Partial<Record<ActivityMetric | LatencyBucketMetric, number>>;
  visitor?: string;
  question?: string;
}

/**
 * Backend latency is kept as a log-scale histogram per interface and day: bucket i holds calls that took at most
 * 1.25^i ms (bucket 0: up to 1 ms; the last: everything slower). A percentile read back from it is within one
 * bucket's width, 25%, and interpolation halves that on typical spreads; p50 and p95 of any range are then a sum
 * of rows, never a scan of the calls.
 */
const RATIO = 1.25;
export const LATENCY_BUCKETS = 56; // 1.25^55 ms is about 3.4 minutes, past every timeout.
export type LatencyBucketMetric = `latency_b${number}`;

export function latencyBucket(ms: number): number {
  if (!(ms > 1)) return 0;
  return Math.min(LATENCY_BUCKETS - 1, Math.ceil(Math.log(ms) / Math.log(RATIO) - 1e-9));
}

export const latencyMetric = (ms: number): LatencyBucketMetric => `latency_b${latencyBucket(ms)}`;

/** The bucket index of a stored metric name, or undefined for other metrics. */
export function bucketOfMetric(metric: string): number | undefined {
  const match = /^latency_b(\d{1,2})$/.exec(metric);
  if (!match) return undefined;
  const index = Number(match[1]);
  return index < LATENCY_BUCKETS ? index : undefined;
}

/**
 * The q-quantile (0 < q <= 1) of a histogram given as counts per bucket, interpolated geometrically inside the
 * bucket it falls in. Null when the histogram is empty.
 */
export function quantileOf(counts: readonly number[], q: number): number | null {
  const total = counts.reduce((a, b) => a + b, 0);
  if (total === 0) return null;
  const rank = q * total;
  let seen = 0;
  for (let i = 0; i < counts.length; i++) {
    const n = counts[i] ?? 0;
    if (n === 0) continue;
    if (seen + n >= rank) {
      const upper = RATIO ** i;
      const lower = i === 0 ? 0 : RATIO ** (i - 1);
      const within = (rank - seen) / n;
      const value = i === 0 ? upper * within : lower * (upper / lower) ** within;
      return Math.round(value * 100) / 100;
    }
    seen += n;
  }
  return Math.round(RATIO ** (counts.length - 1) * 100) / 100;
}

/** Questions are grouped as written, give or take case and spacing: trimmed, lower case, one space, 200 characters. */
export const normaliseQuestion = (text: string) => text.trim().replace(/\s+/g, ' ').toLowerCase().slice(0, 200);

/** An upstream failure's kind as the ai-errors mapping names it in `details`, folded into the monitoring kinds. */
export function upstreamErrorKind(aiKind: string): UpstreamErrorKind | undefined {
  switch (aiKind) {
    case 'connection_failed':
    case 'blocked':
      return 'connection';
    case 'timeout':
      return 'timeout';
    case 'invalid_response':
      return 'invalid_response';
    case 'auth_failed':
      return 'auth';
    case 'rate_limited':
    case 'upstream_error':
      return 'http';
    default:
      // 'aborted' is the caller leaving, not the upstream failing.
      return undefined;
  }
}

/** One answered chat turn. */
export function chatTurnActivity(turn: {
  isNewSession: boolean;
  visitorKey: string;
  usage: { promptTokens: number; completionTokens: number };
  knowledgeBase: boolean;
  grounded: boolean;
  question: string;
  latencyMs: number;
}): Activity {
  const unanswered = turn.knowledgeBase && !turn.grounded;
  return {
    metrics: {
      conversations: turn.isNewSession ? 1 : 0,
      messages: 1,
      replies: 1,
      tokens_in: turn.usage.promptTokens,
      tokens_out: turn.usage.completionTokens,
      kb_queries: turn.knowledgeBase ? 1 : 0,
      unanswered: unanswered ? 1 : 0,
      upstream_calls: 1,
      [latencyMetric(turn.latencyMs)]: 1,
    },
    visitor: turn.visitorKey,
    ...(unanswered ? { question: normaliseQuestion(turn.question) } : {}),
  };
}

/** A turn whose backend failed: counted as a call with its latency and kind, nothing stored. */
export const failedCallActivity = (kind: UpstreamErrorKind, latencyMs: number): Activity => ({
  metrics: { upstream_calls: 1, [`upstream_error_${kind}`]: 1, [latencyMetric(latencyMs)]: 1 },
});

/** A direct knowledge-base query (not a chat turn). */
export const kbQueryActivity = (query: string, grounded: boolean, usage: { promptTokens: number; completionTokens: number }): Activity => ({
  metrics: { kb_queries: 1, unanswered: grounded ? 0 : 1, tokens_in: usage.promptTokens, tokens_out: usage.completionTokens },
  ...(grounded ? {} : { question: normaliseQuestion(query) }),
});
