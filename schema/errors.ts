/**
 * The closed list of error codes. Every error a client can see carries one of these; one table,
 * adapters/inbound/http-status.ts, decides which HTTP status each one gets, for every inbound adapter.
 */
export const ERROR_CODES = [
  'BAD_REQUEST',
  'VALIDATION_FAILED',
  'MALFORMED_JSON',
  'UNAUTHORIZED',
  'FORBIDDEN',
  'HTTPS_REQUIRED',
  'NOT_FOUND',
  'METHOD_NOT_ALLOWED',
  'REQUEST_TIMEOUT',
  'CONFLICT',
  'PAYLOAD_TOO_LARGE',
  'UNSUPPORTED_MEDIA_TYPE',
  'HEADERS_TOO_LARGE',
  'MISDIRECTED_REQUEST',
  'RATE_LIMITED',
  'UPSTREAM_CONNECTION_FAILED',
  'UPSTREAM_INVALID_RESPONSE',
  'UPSTREAM_TIMEOUT',
  'UPSTREAM_ERROR',
  'INTERNAL_ERROR',
  'SERVICE_UNAVAILABLE',
] as const;

export type ErrorCode = (typeof ERROR_CODES)[number];

/** Validation issues as `details`: `path.to.field: message`, at most ten, joined by `; `. */
export function describeIssues(issues: ReadonlyArray<{ path: readonly PropertyKey[]; message: string }>): string {
  return issues
    .slice(0, 10)
    .map((i) => `${i.path.length ? i.path.map(String).join('.') : '(body)'}: ${i.message}`)
    .join('; ');
}

export class AppError extends Error {
  override readonly name = 'AppError';
  constructor(
    readonly code: ErrorCode,
    message: string,
    /** Shown to the client as `error.details`: which field, which limit. Never internals. */
    readonly details: string = '',
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }
}
