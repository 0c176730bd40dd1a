import type { IncomingMessage, ServerResponse } from 'node:http';
import { nodeHTTPRequestHandler } from '@trpc/server/adapters/node-http';
import type { AnyRouter } from '@trpc/server';
import type { Context } from '../../routers/context.ts';
import { toClientError } from '../rest/errors.ts';
import { HTTP_STATUS } from '../rest/status.ts';

/** /trpc/* for first-party apps using the typed client. Same procedures, same context, same status mapping. */
export function createTrpcHandler(router: AnyRouter) {
  return async (req: IncomingMessage, res: ServerResponse, ctx: Context, url: URL) => {
    await nodeHTTPRequestHandler({
      router,
      req,
      res,
      path: url.pathname.slice('/trpc/'.length),
      createContext: () => ctx,
      responseMeta({ errors }) {
        const statuses = errors.map((e) => HTTP_STATUS[toClientError(e).appError.code]);
        const status = statuses.length === 0 ? undefined : statuses.every((s) => s === statuses[0]) ? statuses[0] : 207;
        return { status, headers: ctx.responseHeaders };
      },
      onError({ error, path }) {
        if (toClientError(error).unexpected) {
          ctx.deps.errorReporter.capture(error.cause ?? error, { requestId: ctx.requestId, path: `/trpc/${path ?? ''}`, method: req.method });
        }
      },
    });
  };
}
