/**
 * The one place an AI upstream's failure (the chat connector's endpoint, a knowledge base's language model or
 * embedding provider) becomes an API error. The rule: the upstream's own failures are the UPSTREAM_* codes
 * everywhere (502, 504 for a timeout), in chat and in knowledge-base queries alike; SERVICE_UNAVAILABLE (503)
 * stays for what is ours (an interface with no backend configured, our own dependency down).
 * Visitors (chat callers holding a key from a public page) get a fixed message per kind and the kind in
 * `details`; owners get the clear message with the upstream's excerpt in `details`.
 */
import type { AppDeps } from './context.ts';
import { AppError, type ErrorCode } from '../schema/errors.ts';
import { AiUpstreamError, formatSeconds, upstreamMessages, type AiErrorKind, type AiSource } from '../adapters/outbound/ai/core/upstream-error.ts';

export type AiAudience = 'visitor' | 'owner';

export const AI_ERROR_CODES: Record<AiErrorKind, ErrorCode> = {
  connection_failed: 'UPSTREAM_CONNECTION_FAILED',
  blocked: 'UPSTREAM_CONNECTION_FAILED',
  // Our caller went away: nobody reads the answer, but it is still not our fault.
  aborted: 'UPSTREAM_CONNECTION_FAILED',
  timeout: 'UPSTREAM_TIMEOUT',
  invalid_response: 'UPSTREAM_INVALID_RESPONSE',
  auth_failed: 'UPSTREAM_ERROR',
  rate_limited: 'UPSTREAM_ERROR',
  upstream_error: 'UPSTREAM_ERROR',
};

/** How a visitor's message names the upstream: the knowledge base's providers are the owner's business, not the visitor's. */
const VISITOR_NAMES: Record<AiSource, string> = {
  endpoint: 'the external API',
  language_model: "the knowledge base's language model",
  embeddings: "the knowledge base's search",
};

const OWNER_HEADLINES: Record<AiSource, string> = {
  endpoint: 'The external endpoint could not answer',
  language_model: 'The language model could not answer',
  embeddings: 'The embedding provider could not embed the query',
};

const LOG_MESSAGES: Record<AiSource, string> = {
  endpoint: 'external endpoint failed during a visitor chat',
  language_model: 'language model failed during a visitor chat',
  embeddings: 'embedding provider failed during a visitor chat',
};

/** Nothing of the upstream: no body, no header, no address; only our words, the kind and its HTTP status. */
function visitorMessage(error: AiUpstreamError): string {
  const name = VISITOR_NAMES[error.source];
  switch (error.kind) {
    case 'timeout':
      return `${name} took longer than ${formatSeconds(error.timeoutMs ?? 30_000)} to answer`;
    case 'invalid_response':
      return error.source === 'endpoint'
        ? 'invalid response format: the external API did not answer with JSON carrying a recognised text field'
        : `invalid response format: ${name} did not answer in the expected format`;
    case 'connection_failed':
    case 'blocked':
      // The spec's clear message for an endpoint (it tells the owner testing their widget what to do).
      return error.source === 'endpoint' ? upstreamMessages('endpoint').connectionFailed : `could not connect to ${name}; please try again later`;
    case 'aborted':
      return `the request to ${name} was cancelled`;
    case 'auth_failed':
    case 'rate_limited':
    case 'upstream_error':
      return `${name} answered with an error${error.status === undefined ? '' : ` (HTTP ${error.status})`}`;
  }
}

/** The clear message, and the upstream's excerpt or the transport's cause when the message does not already carry it. */
function ownerReason(error: AiUpstreamError): string {
  return error.detail === undefined || error.message.includes(error.detail) ? error.message : `${error.message} (${error.detail})`;
}

export function upstreamAppError(error: AiUpstreamError, audience: AiAudience): AppError {
  const code = AI_ERROR_CODES[error.kind];
  return audience === 'visitor' ? new AppError(code, visitorMessage(error), error.kind) : new AppError(code, OWNER_HEADLINES[error.source], ownerReason(error));
}

/** A visitor's failure: the log keeps what the upstream said under the request id, the visitor gets the fixed message. */
export function visitorUpstreamError(deps: Pick<AppDeps, 'logger'>, requestId: string, error: AiUpstreamError): AppError {
  deps.logger.warn(LOG_MESSAGES[error.source], {
    requestId,
    source: error.source,
    kind: error.kind,
    status: error.status ?? null,
    upstreamMessage: error.message,
    upstreamDetail: error.detail ?? null,
  });
  return upstreamAppError(error, 'visitor');
}

/** Rethrows an AI upstream's failure as `toAppError` says, anything else unchanged. */
export function rethrowUpstream(error: unknown, toAppError: (error: AiUpstreamError) => AppError): never {
  if (error instanceof AiUpstreamError) throw toAppError(error);
  throw error;
}
