import { TRPCError } from '@trpc/server';
import { AppError, describeIssues, type ErrorCode } from '../../schema/errors.ts';
import { isForeignKeyViolation, isNoResult } from '../../db/errors.ts';

interface Issue {
  path: PropertyKey[];
  message: string;
}

function isZodLike(error: unknown): error is { issues: Issue[] } {
  return typeof error === 'object' && error !== null && Array.isArray((error as { issues?: unknown }).issues);
}

const FROM_TRPC: Partial<Record<TRPCError['code'], ErrorCode>> = {
  PARSE_ERROR: 'MALFORMED_JSON',
  BAD_REQUEST: 'BAD_REQUEST',
  UNAUTHORIZED: 'UNAUTHORIZED',
  FORBIDDEN: 'FORBIDDEN',
  NOT_FOUND: 'NOT_FOUND',
  METHOD_NOT_SUPPORTED: 'METHOD_NOT_ALLOWED',
  CONFLICT: 'CONFLICT',
  PAYLOAD_TOO_LARGE: 'PAYLOAD_TOO_LARGE',
  UNSUPPORTED_MEDIA_TYPE: 'UNSUPPORTED_MEDIA_TYPE',
  TOO_MANY_REQUESTS: 'RATE_LIMITED',
  SERVICE_UNAVAILABLE: 'SERVICE_UNAVAILABLE',
};

/**
 * Any thrown value -> an AppError the client may see, plus whether it was unexpected (then it is
 * reported and its message replaced: 5xx never leak internals).
 */
export function toClientError(error: unknown): { appError: AppError; unexpected: boolean } {
  const cause = error instanceof TRPCError ? error.cause : error;
  if (cause instanceof AppError) return { appError: cause, unexpected: false };
  if (error instanceof TRPCError && error.code === 'BAD_REQUEST' && isZodLike(cause)) {
    return { appError: new AppError('VALIDATION_FAILED', 'Invalid request parameters', describeIssues(cause.issues)), unexpected: false };
  }
  // A write whose parent is deleted between its ownership check and its statement (a key for an interface, a change
  // to a knowledge base, a visitor's first message, streamed or not) meets the parent's foreign key, or an update that
  // finds no row. To the caller that parent is gone: a 404 as if the delete had come first, never a 500.
  if (isForeignKeyViolation(cause) || isNoResult(cause)) {
    return { appError: new AppError('NOT_FOUND', 'Not found', 'What this request names was deleted while it ran'), unexpected: false };
  }
  if (error instanceof TRPCError && !(cause instanceof Error && error.code === 'INTERNAL_SERVER_ERROR')) {
    const code = FROM_TRPC[error.code];
    if (code) return { appError: new AppError(code, error.message), unexpected: false };
  }
  return {
    appError: new AppError('INTERNAL_ERROR', 'Internal server error', 'The error was logged; quote the request id when reporting it'),
    unexpected: true,
  };
}
