import { describe, expect, it } from 'vitest';
import { AppError } from '../schema/errors.ts';
import { AI_ERROR_KINDS, AiUpstreamError, type AiErrorKind, type AiSource } from '../adapters/outbound/ai/core/upstream-error.ts';
import { HTTP_STATUS } from '../adapters/inbound/http-status.ts';
import { AI_ERROR_CODES, rethrowUpstream, upstreamAppError, visitorUpstreamError } from './ai-errors.ts';

const SOURCES: AiSource[] = ['endpoint', 'language_model', 'embeddings'];
const EXCERPT = 'Traceback: KeyError at /srv/owner-bot/app.py (db-7.internal)';

function failure(source: AiSource, kind: AiErrorKind): AiUpstreamError {
  const status = kind === 'auth_failed' ? 401 : kind === 'rate_limited' ? 429 : kind === 'upstream_error' ? 500 : undefined;
  return new AiUpstreamError(source, kind, `the upstream failed (${kind}): ${EXCERPT}`, {
    status,
    detail: EXCERPT,
    timeoutMs: kind === 'timeout' ? 30_000 : undefined,
  });
}

describe('the one mapping of AI upstream failures', () => {
  it('gives every kind its code, the same whichever upstream failed and whoever asked', () => {
    const expected: Record<AiErrorKind, string> = {
      connection_failed: 'UPSTREAM_CONNECTION_FAILED',
      blocked: 'UPSTREAM_CONNECTION_FAILED',
      aborted: 'UPSTREAM_CONNECTION_FAILED',
      timeout: 'UPSTREAM_TIMEOUT',
      invalid_response: 'UPSTREAM_INVALID_RESPONSE',
      auth_failed: 'UPSTREAM_ERROR',
      rate_limited: 'UPSTREAM_ERROR',
      upstream_error: 'UPSTREAM_ERROR',
    };
    expect(Object.keys(AI_ERROR_CODES).sort()).toEqual([...AI_ERROR_KINDS].sort());
    for (const kind of AI_ERROR_KINDS) {
      for (const source of SOURCES) {
        for (const audience of ['visitor', 'owner'] as const) {
          const mapped = upstreamAppError(failure(source, kind), audience);
          expect(mapped.code, `${source} ${kind} ${audience}`).toBe(expected[kind]);
          // The upstream's failure is a gateway status, never 500 nor 503 (which stays for what is ours).
          expect([502, 504]).toContain(HTTP_STATUS[mapped.code]);
        }
      }
    }
  });

  it('tells a visitor only our fixed message and the kind, an owner the reason with the excerpt', () => {
    for (const kind of AI_ERROR_KINDS) {
      for (const source of SOURCES) {
        const error = failure(source, kind);
        const visitor = upstreamAppError(error, 'visitor');
        expect(visitor.details).toBe(kind);
        expect(visitor.message).not.toContain('Traceback');
        expect(visitor.message).not.toContain('owner-bot');
        expect(visitor.message).not.toContain('db-7');
        // Fixed per kind: the same whatever the upstream said.
        const other = new AiUpstreamError(source, kind, 'something else entirely', { status: error.status, detail: 'other', timeoutMs: error.timeoutMs });
        expect(upstreamAppError(other, 'visitor').message).toBe(visitor.message);

        const owner = upstreamAppError(error, 'owner');
        expect(owner.details).toContain(EXCERPT);
        expect(owner.message).not.toContain('Traceback');
      }
    }
  });

  it('keeps the spec wording for an endpoint and names the status a visitor may know', () => {
    const endpoint = (kind: AiErrorKind, status?: number) =>
      upstreamAppError(new AiUpstreamError('endpoint', kind, 'x', { status, timeoutMs: 5_000 }), 'visitor').message;
    expect(endpoint('upstream_error', 500)).toBe('the external API answered with an error (HTTP 500)');
    expect(endpoint('upstream_error')).toBe('the external API answered with an error');
    expect(endpoint('timeout')).toBe('the external API took longer than 5 seconds to answer');
    expect(endpoint('connection_failed')).toMatch(/localhost.*127\.0\.0\.1.*tunnelling service with a public HTTPS address/);
    expect(endpoint('invalid_response')).toMatch(/^invalid response format: /);
    const model = upstreamAppError(new AiUpstreamError('language_model', 'auth_failed', 'x', { status: 401 }), 'visitor').message;
    expect(model).toBe("the knowledge base's language model answered with an error (HTTP 401)");
  });

  it('owner details add the detail only when the message lacks it', () => {
    const withExcerpt = new AiUpstreamError('embeddings', 'upstream_error', 'the embedding provider answered HTTP 500: boom', { status: 500, detail: 'boom' });
    expect(upstreamAppError(withExcerpt, 'owner')).toMatchObject({
      message: 'The embedding provider could not embed the query',
      details: 'the embedding provider answered HTTP 500: boom',
    });
    const withCause = new AiUpstreamError('language_model', 'connection_failed', 'could not connect', { detail: 'connect ECONNREFUSED 203.0.113.9:443' });
    expect(upstreamAppError(withCause, 'owner').details).toBe('could not connect (connect ECONNREFUSED 203.0.113.9:443)');
  });

  it("logs a visitor's failure with the request id and the upstream's words, and rethrows anything else unchanged", () => {
    const lines: Array<[string, Record<string, unknown> | undefined]> = [];
    const logger = { warn: (msg: string, fields?: Record<string, unknown>) => void lines.push([msg, fields]) } as never;
    const mapped = visitorUpstreamError({ logger }, 'req-1', failure('endpoint', 'upstream_error'));
    expect(mapped).toBeInstanceOf(AppError);
    expect(lines).toEqual([
      [
        'external endpoint failed during a visitor chat',
        {
          requestId: 'req-1',
          source: 'endpoint',
          kind: 'upstream_error',
          status: 500,
          upstreamMessage: expect.stringContaining(EXCERPT),
          upstreamDetail: EXCERPT,
        },
      ],
    ]);

    const other = new TypeError('a bug');
    expect(() => rethrowUpstream(other, () => mapped)).toThrow(other);
    expect(() => rethrowUpstream(failure('embeddings', 'timeout'), (e) => upstreamAppError(e, 'owner'))).toThrow(AppError);
  });
});
