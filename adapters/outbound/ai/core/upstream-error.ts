/**
 * The one failure of every outbound AI call: the chat connector's endpoint, a knowledge base's language model
 * and its embedding provider. A closed set of kinds, so the routers map each to an API error in one place
 * (routers/ai-errors.ts) whichever upstream failed. `message` is clear text for the owner; it and `detail`
 * (the upstream's excerpt or the transport's cause) never hold the API key, but may hold what the upstream
 * said, so neither is for visitors.
 */
import { OutboundError } from '../../http/outbound-error.ts';

export type AiSource = 'endpoint' | 'language_model' | 'embeddings';

export type AiErrorKind =
  /** Refused, DNS, TLS, an invalid URL. */
  | 'connection_failed'
  /** The address is private or local (the SSRF guard refused it). */
  | 'blocked'
  | 'timeout'
  /** Not JSON, or JSON without what the call needs. */
  | 'invalid_response'
  /** HTTP 401/403. */
  | 'auth_failed'
  /** HTTP 429. */
  | 'rate_limited'
  /** Any other non-2xx answer (redirects included), or an error reported inside a 2xx body. */
  | 'upstream_error'
  /** Our caller cancelled (client disconnect, shutdown). */
  | 'aborted';

export const AI_ERROR_KINDS: readonly AiErrorKind[] = [
  'connection_failed',
  'blocked',
  'timeout',
  'invalid_response',
  'auth_failed',
  'rate_limited',
  'upstream_error',
  'aborted',
];

export class AiUpstreamError extends Error {
  override readonly name = 'AiUpstreamError';
  /** HTTP status of the upstream's answer, when there was one. */
  readonly status: number | undefined;
  /** Short upstream excerpt or low-level cause; no key. */
  readonly detail: string | undefined;
  /** The limit that ran out, for a timeout. */
  readonly timeoutMs: number | undefined;

  constructor(
    readonly source: AiSource,
    readonly kind: AiErrorKind,
    message: string,
    options: { status?: number; detail?: string; timeoutMs?: number } = {},
  ) {
    super(message);
    this.status = options.status;
    this.detail = options.detail === '' ? undefined : options.detail;
    this.timeoutMs = options.timeoutMs;
  }
}

/** How each upstream is named in messages. */
const SUBJECTS: Record<AiSource, { name: string; place: string; url: string; target: string }> = {
  endpoint: { name: 'the external API', place: 'the endpoint', url: 'the endpoint URL', target: 'this endpoint' },
  language_model: {
    name: 'the language-model provider',
    place: "the language model's base URL",
    url: "the language model's base URL",
    target: 'this language model',
  },
  embeddings: {
    name: 'the embedding provider',
    place: "the embedding provider's base URL",
    url: "the embedding provider's base URL",
    target: 'this embedding provider',
  },
};

function messagesFor(source: AiSource) {
  const { name, place, url, target } = SUBJECTS[source];
  return {
    connectionFailed:
      `could not connect to ${name}: the endpoint is unreachable. ` +
      'A local address such as localhost or 127.0.0.1 (or any address on your own machine or network) ' +
      `cannot be reached by the service: expose the API through a tunnelling service with a public HTTPS address and use that address as ${url}`,
    blocked:
      `${place} resolves to a private or local address, which the service will not call; ` +
      `expose it through a tunnelling service with a public HTTPS address`,
    invalidUrl: `${url} is not valid: use a full http:// or https:// URL without credentials`,
    aborted: `the request to ${name} was cancelled`,
    redirect: `${name} answered with a redirect; redirects are not followed — use the final URL`,
    auth: `${name} rejected the API key; check the key configured for ${target}`,
    rateLimited: `${name} is rate limiting requests; try again later`,
    timeout: (timeoutMs: number): string => `${name} took longer than ${formatSeconds(timeoutMs)} to answer`,
    httpStatus: (status: number, excerpt: string): string => `${name} answered HTTP ${status}${excerpt === '' ? '' : `: ${excerpt}`}`,
    reported: (excerpt: string): string => `${name} reported an error: ${excerpt}`,
  };
}

const MESSAGES: Record<AiSource, ReturnType<typeof messagesFor>> = {
  endpoint: messagesFor('endpoint'),
  language_model: messagesFor('language_model'),
  embeddings: messagesFor('embeddings'),
};

/** The clear messages about one upstream (the spec's wording for the connector's endpoint). */
export function upstreamMessages(source: AiSource): ReturnType<typeof messagesFor> {
  return MESSAGES[source];
}

/** A failure before any answer: the guarded client's transport errors, or anything else thrown on the way. */
export function transportError(source: AiSource, err: unknown, timeoutMs: number, redact: (text: string) => string = (text) => text): AiUpstreamError {
  if (err instanceof AiUpstreamError) return err;
  const messages = MESSAGES[source];
  if (err instanceof OutboundError) {
    // OutboundError messages name only scheme://host:port, never the path or query.
    const detail = redact(err.message);
    switch (err.kind) {
      case 'connection_failed':
      case 'dns_failure':
      case 'tls_error':
        return new AiUpstreamError(source, 'connection_failed', messages.connectionFailed, { detail });
      case 'blocked_address':
        return new AiUpstreamError(source, 'blocked', messages.blocked, { detail });
      case 'timeout':
        return new AiUpstreamError(source, 'timeout', messages.timeout(timeoutMs), { detail, timeoutMs });
      case 'invalid_url':
        return new AiUpstreamError(source, 'connection_failed', messages.invalidUrl, { detail });
      case 'response_too_large':
        return invalidResponse(source, 'the reply is too large', detail);
      case 'aborted':
        return new AiUpstreamError(source, 'aborted', messages.aborted, { detail });
    }
  }
  const detail = err instanceof Error && err.message !== '' ? redact(err.message) : 'network error';
  return new AiUpstreamError(source, 'connection_failed', messages.connectionFailed, { detail });
}

/** A non-2xx answer. `excerpt` comes from upstreamExcerpt; `retryAfter` is the 429's header, if any. */
export function statusError(source: AiSource, status: number, excerpt: string, retryAfter?: string): AiUpstreamError {
  const messages = MESSAGES[source];
  const options = { status, detail: excerpt };
  if (status >= 300 && status <= 399) return new AiUpstreamError(source, 'upstream_error', `${messages.redirect} (HTTP ${status})`, { status });
  if (status === 401 || status === 403) return new AiUpstreamError(source, 'auth_failed', `${messages.auth} (HTTP ${status})`, options);
  if (status === 429) {
    const wait = retryAfter !== undefined && /^\d{1,6}$/.test(retryAfter) ? `; retry after ${retryAfter} s` : '';
    return new AiUpstreamError(source, 'rate_limited', `${messages.rateLimited} (HTTP ${status})${wait}`, options);
  }
  return new AiUpstreamError(source, 'upstream_error', messages.httpStatus(status, excerpt), options);
}

export function invalidResponse(source: AiSource, reason: string, detail?: string): AiUpstreamError {
  return new AiUpstreamError(source, 'invalid_response', `invalid response format: ${reason}`, detail === undefined ? {} : { detail });
}

/** An error the upstream reported inside an answer (a 2xx body or a stream event); `excerpt` is already short and key-free. */
export function reportedError(source: AiSource, excerpt: string): AiUpstreamError {
  const short = excerpt === '' ? 'unknown error' : excerpt;
  return new AiUpstreamError(source, 'upstream_error', MESSAGES[source].reported(short), { detail: short });
}

/** "30 seconds", "0.3 seconds", "1 second". */
export function formatSeconds(ms: number): string {
  const seconds = ms / 1000;
  const text = Number.isInteger(seconds) ? String(seconds) : String(Number(seconds.toFixed(3)));
  return `${text} second${seconds === 1 ? '' : 's'}`;
}
