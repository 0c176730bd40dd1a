import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { GuardedHttpClient } from './http/guarded-client.ts';
import type { Logger } from './logger.ts';

export interface ErrorReporter {
  /** Records an unexpected error: a structured log line always, a Sentry-compatible event when SENTRY_DSN is set. */
  capture(error: unknown, context: { requestId?: string; path?: string; method?: string }): void;
}

interface ParsedDsn {
  envelopeUrl: string;
  publicKey: string;
  dsn: string;
}

function parseDsn(dsn: string): ParsedDsn {
  const url = new URL(dsn);
  const projectId = url.pathname.split('/').filter(Boolean).pop();
  if (!url.username || !projectId) throw new Error('SENTRY_DSN must look like https://<key>@<host>/<project>');
  const prefix = url.pathname.slice(0, url.pathname.lastIndexOf('/'));
  return { envelopeUrl: `${url.protocol}//${url.host}${prefix}/api/${projectId}/envelope/`, publicKey: url.username, dsn };
}

function stackFrames(error: Error) {
  // Sentry wants the innermost frame last.
  return (error.stack ?? '')
    .split('\n')
    .slice(1)
    .map((line) => /at (?:(.+?) \()?(.+?):(\d+):(\d+)\)?$/.exec(line.trim()))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => ({ function: m[1] ?? '?', filename: m[2], lineno: Number(m[3]), colno: Number(m[4]) }))
    .reverse();
}

export function createErrorReporter(deps: { logger: Logger; http: GuardedHttpClient; sentryDsn?: string }): ErrorReporter {
  const sentry = deps.sentryDsn ? parseDsn(deps.sentryDsn) : undefined;
  return {
    capture(error, context) {
      const err = error instanceof Error ? error : new Error(String(error));
      deps.logger.error('unhandled error', { ...context, errorName: err.name, errorMessage: err.message, stack: err.stack });
      if (!sentry) return;
      const eventId = randomBytes(16).toString('hex');
      const sentAt = new Date().toISOString();
      const event = {
        event_id: eventId,
        timestamp: Date.now() / 1000,
        platform: 'node',
        level: 'error',
        server_name: hostname(),
        tags: { requestId: context.requestId ?? '' },
        request: context.path ? { method: context.method, url: context.path } : undefined,
        exception: { values: [{ type: err.name, value: err.message, stacktrace: { frames: stackFrames(err) } }] },
      };
      const body = [JSON.stringify({ event_id: eventId, sent_at: sentAt, dsn: sentry.dsn }), JSON.stringify({ type: 'event' }), JSON.stringify(event)].join(
        '\n',
      );
      deps.http
        .request(sentry.envelopeUrl, {
          method: 'POST',
          body,
          timeoutMs: 5000,
          headers: {
            'content-type': 'application/x-sentry-envelope',
            'x-sentry-auth': `Sentry sentry_version=7, sentry_key=${sentry.publicKey}, sentry_client=chat-interface-service/0.1`,
          },
        })
        .catch((sendError: unknown) => deps.logger.warn('error report not delivered', { reason: String((sendError as Error).message) }));
    },
  };
}
