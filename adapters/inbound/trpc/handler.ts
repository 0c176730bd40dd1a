import type { IncomingMessage, ServerResponse } from 'node:http';
import { nodeHTTPRequestHandler } from '@trpc/server/adapters/node-http';
import { TRPC_ERROR_CODES_BY_KEY, type TRPC_ERROR_CODE_KEY } from '@trpc/server/rpc';
import type { AnyRouter } from '@trpc/server';
import type { Context } from '../../../routers/context.ts';
import type { ErrorCode } from '../../../schema/errors.ts';
import { toClientError } from '../client-error.ts';
import { HTTP_STATUS } from '../http-status.ts';
import { readJsonText } from '../request-body.ts';
import { closeWhenStalled } from '../stalled-reader.ts';

const TRPC_CODE: Record<ErrorCode, TRPC_ERROR_CODE_KEY> = {
  BAD_REQUEST: 'BAD_REQUEST',
  VALIDATION_FAILED: 'BAD_REQUEST',
  MALFORMED_JSON: 'PARSE_ERROR',
  UNAUTHORIZED: 'UNAUTHORIZED',
  FORBIDDEN: 'FORBIDDEN',
  HTTPS_REQUIRED: 'FORBIDDEN',
  NOT_FOUND: 'NOT_FOUND',
  METHOD_NOT_ALLOWED: 'METHOD_NOT_SUPPORTED',
  REQUEST_TIMEOUT: 'TIMEOUT',
  CONFLICT: 'CONFLICT',
  PAYLOAD_TOO_LARGE: 'PAYLOAD_TOO_LARGE',
  UNSUPPORTED_MEDIA_TYPE: 'UNSUPPORTED_MEDIA_TYPE',
  HEADERS_TOO_LARGE: 'BAD_REQUEST',
  MISDIRECTED_REQUEST: 'BAD_REQUEST',
  RATE_LIMITED: 'TOO_MANY_REQUESTS',
  UPSTREAM_CONNECTION_FAILED: 'BAD_GATEWAY',
  UPSTREAM_INVALID_RESPONSE: 'BAD_GATEWAY',
  UPSTREAM_TIMEOUT: 'GATEWAY_TIMEOUT',
  UPSTREAM_ERROR: 'BAD_GATEWAY',
  INTERNAL_ERROR: 'INTERNAL_SERVER_ERROR',
  SERVICE_UNAVAILABLE: 'SERVICE_UNAVAILABLE',
};

/**
 * An AppError thrown in a procedure reaches tRPC wrapped in an INTERNAL_SERVER_ERROR, so the default
 * error shape says `code: INTERNAL_SERVER_ERROR, httpStatus: 500` even though the response is a 404.
 * On the wire the shape's code and httpStatus follow the same mapping as the HTTP status, and every error the
 * client may see (tRPC's own and the input validation's included) carries its AppError code and details.
 */
function withWireErrorCodes(router: AnyRouter): AnyRouter {
  const config = router._def._config;
  const errorFormatter: typeof config.errorFormatter = (opts) => {
    const shape = config.errorFormatter(opts);
    const { appError, unexpected } = toClientError(opts.error);
    // An unexpected error keeps the formatter's fixed message; its code is the closed list's too.
    if (unexpected) return { ...shape, data: { ...shape.data, appCode: appError.code, details: appError.details } };
    const code = TRPC_CODE[appError.code];
    // The same code, message and details as REST's envelope: an input error names its fields instead of carrying the
    // validation library's raw issue list as its message.
    return {
      ...shape,
      code: TRPC_ERROR_CODES_BY_KEY[code],
      message: appError.message,
      data: { ...shape.data, code, httpStatus: HTTP_STATUS[appError.code], appCode: appError.code, details: appError.details ?? null },
    };
  };
  return { ...router, _def: { ...router._def, _config: { ...config, errorFormatter } } } as AnyRouter;
}

/** Calls per tRPC batch: each is counted by the rate limiter, and a huge batch is refused outright. */
const MAX_BATCH_SIZE = 20;

/** /trpc/* for first-party apps using the typed client. Same procedures, same context, same status mapping. */
export function createTrpcHandler(appRouter: AnyRouter, maxBodyBytes: number) {
  const router = withWireErrorCodes(appRouter);
  return async (req: IncomingMessage, res: ServerResponse, ctx: Context, url: URL) => {
    // Streamed results (`trpc-accept: application/jsonl`) are written by tRPC, which waits for a reader without end.
    closeWhenStalled(res);
    await nodeHTTPRequestHandler({
      router,
      req,
      res,
      path: url.pathname.slice('/trpc/'.length),
      maxBodySize: maxBodyBytes,
      maxBatchSize: MAX_BATCH_SIZE,
      // The body is read here rather than by tRPC, whose decoding replaces invalid UTF-8 with U+FFFD: it would be
      // stored so. tRPC takes a body handed over as text as it is; a refusal becomes a tRPC error like any other.
      middleware: (request, _response, next) => {
        if (request.method === 'GET' || request.method === 'HEAD') return next();
        readJsonText(request, maxBodyBytes).then((text) => {
          (request as IncomingMessage & { body?: string }).body = text;
          next();
        }, next);
      },
      createContext: () => ctx,
      responseMeta({ errors }) {
        const refusals = errors.map((e) => toClientError(e).appError);
        const statuses = refusals.map((e) => HTTP_STATUS[e.code]);
        const status = statuses.length === 0 ? undefined : statuses.every((s) => s === statuses[0]) ? statuses[0] : 207;
        // An error's own headers (Retry-After of a body refused for lack of room) go out as REST sends them.
        return { status, headers: Object.assign({}, ctx.responseHeaders, ...refusals.map((e) => e.headers)) };
      },
      onError({ error, path }) {
        if (toClientError(error).unexpected) {
          ctx.deps.errorReporter.capture(error.cause ?? error, { requestId: ctx.requestId, path: `/trpc/${path ?? ''}`, method: req.method });
        }
      },
    });
  };
}
