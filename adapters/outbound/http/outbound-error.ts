/**
 * The one error every outbound failure becomes, and the mapping from Node's socket/TLS errors to it: callers
 * branch on `kind`, and messages name only the origin (scheme://host:port), never a path that may carry a secret.
 */

export type OutboundErrorKind =
  | 'blocked_address'
  | 'invalid_url'
  | 'dns_failure'
  | 'connection_failed'
  | 'timeout'
  | 'response_too_large'
  | 'aborted'
  | 'tls_error';

export class OutboundError extends Error {
  constructor(
    readonly kind: OutboundErrorKind,
    message: string,
  ) {
    super(message);
    this.name = 'OutboundError';
  }
}

export interface ErrorContext {
  /** scheme://host:port only: paths and queries of webhook URLs often carry secrets. */
  origin: string;
  isHttps: boolean;
}

export function errorCode(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : undefined;
}

const TLS_CODE = /^(ERR_TLS_|ERR_SSL_)|CERT|SELF_SIGNED|UNABLE_TO_(GET|VERIFY|DECRYPT)|HOSTNAME_MISMATCH/;

export function toOutboundError(err: unknown, ctx: ErrorContext): OutboundError {
  if (err instanceof OutboundError) return err;
  const code = errorCode(err);
  const message = err instanceof Error ? err.message : '';
  if ((code !== undefined && TLS_CODE.test(code)) || /SSL routines|certificate/i.test(message) || (ctx.isHttps && code === 'EPROTO')) {
    return new OutboundError('tls_error', `TLS with ${ctx.origin} failed (${code ?? 'handshake error'})`);
  }
  return new OutboundError('connection_failed', `connection to ${ctx.origin} failed (${code ?? 'network error'})`);
}
