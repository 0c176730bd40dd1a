import type { ErrorCode } from '../../schema/errors.ts';

/** The one place an error code becomes an HTTP status. */
export const HTTP_STATUS: Record<ErrorCode, number> = {
  BAD_REQUEST: 400,
  VALIDATION_FAILED: 400,
  MALFORMED_JSON: 400,
  UNAUTHORIZED: 401,
  FORBIDDEN: 403,
  HTTPS_REQUIRED: 403,
  NOT_FOUND: 404,
  METHOD_NOT_ALLOWED: 405,
  CONFLICT: 409,
  PAYLOAD_TOO_LARGE: 413,
  UNSUPPORTED_MEDIA_TYPE: 415,
  RATE_LIMITED: 429,
  INTERNAL_ERROR: 500,
  SERVICE_UNAVAILABLE: 503,
};
