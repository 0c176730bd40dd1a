import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AnyRouter } from '@trpc/server';
import { AppError } from '../../schema/errors.ts';
import type { Context } from '../../routers/context.ts';
import { readJsonBody } from './body.ts';
import { sendError, sendJson, successBody } from './envelope.ts';
import { toClientError } from './errors.ts';
import { legacyLookup, type LegacyRoute } from './legacy.ts';
import { readMultipart } from './multipart.ts';
import { buildRouteTable, type RestRoute } from './routes.ts';
import { streamEvents } from './sse.ts';
import { UPLOAD_LIMIT_BYTES } from '../../schema/plans.ts';
import { enforceRateLimit } from '../../routers/trpc.ts';

type ProcedureFn = (input: unknown) => Promise<unknown>;

const isAsyncIterable = (value: unknown): value is AsyncIterable<unknown> =>
  typeof value === 'object' && value !== null && Symbol.asyncIterator in value;

export interface RestHandlerOptions {
  router: AnyRouter;
  legacyRoutes: LegacyRoute[];
  jsonBodyLimitBytes: number;
  /** Non-procedure documents (openapi.json, docs page) keyed by path. */
  documents: Record<string, () => { contentType: string; body: string }>;
}

/**
 * The /api REST surface: spec paths -> the same procedures the tRPC and GraphQL adapters call.
 * Our own glue (not trpc-to-openapi's node handler) so that bodies with a charset, 201s, the spec's
 * envelopes, 405 + Allow, streaming multipart caps and raw responses are exact; trpc-to-openapi
 * still supplies the meta format and the OpenAPI document.
 */
export function createRestHandler(options: RestHandlerOptions) {
  const table = buildRouteTable(options.router);
  const legacy = legacyLookup(options.legacyRoutes);
  const callerFactory = (options.router as unknown as { createCaller: (ctx: Context) => unknown }).createCaller;

  const procedureOf = (caller: unknown, route: RestRoute): ProcedureFn =>
    route.procedurePath.split('.').reduce<any>((node, key) => node[key], caller) as ProcedureFn;

  async function readInput(req: IncomingMessage, route: RestRoute, url: URL, params: Record<string, string>, ctx: Context) {
    const method = req.method ?? 'GET';
    let input: Record<string, unknown>;
    if (route.meta.multipart) {
      // Who is uploading decides the cap, and anonymous uploads are never read: the procedure answers 401.
      const caller = await ctx.getCaller();
      if (caller.kind !== 'owner') return { ...params };
      // Limited before the body is read: a refused upload costs no memory.
      await enforceRateLimit(ctx, route.meta.rateLimit ?? 'default', route.procedurePath);
      ctx.rateLimitPrecounted = route.procedurePath;
      const { fileField, maxBytes } = route.meta.multipart;
      input = await readMultipart(req, { fileField, maxBytes: maxBytes === 'plan' ? UPLOAD_LIMIT_BYTES[caller.owner.plan] : maxBytes });
    } else if (method === 'GET' || method === 'HEAD') {
      input = Object.fromEntries(url.searchParams);
    } else {
      const body = await readJsonBody(req, options.jsonBodyLimitBytes);
      if (body !== undefined && (typeof body !== 'object' || body === null || Array.isArray(body))) {
        throw new AppError('VALIDATION_FAILED', 'Invalid request parameters', '(body): must be a JSON object');
      }
      input = { ...Object.fromEntries(url.searchParams), ...(body as Record<string, unknown> | undefined) };
    }
    return { ...input, ...params };
  }

  return async function handleRest(req: IncomingMessage, res: ServerResponse, ctx: Context, url: URL): Promise<void> {
    const method = req.method ?? 'GET';
    const document = options.documents[url.pathname];
    if (document && (method === 'GET' || method === 'HEAD')) {
      const doc = document();
      res.writeHead(200, { 'Content-Type': doc.contentType, 'Cache-Control': 'no-cache' });
      res.end(method === 'HEAD' ? undefined : doc.body);
      return;
    }
    const legacyTarget = legacy(method, url.pathname);
    const match = table.match(method === 'HEAD' ? 'GET' : method, legacyTarget ?? url.pathname);
    if (!match) return sendError(res, new AppError('NOT_FOUND', 'Route not found', `${method} ${url.pathname} is not an API operation`));
    if ('allowed' in match) {
      return sendError(res, new AppError('METHOD_NOT_ALLOWED', 'Method not allowed', `${url.pathname} accepts ${match.allowed.join(', ')}`), {
        Allow: match.allowed.join(', '),
      });
    }
    const { route, params } = match;
    const flat = legacyTarget !== undefined || route.meta.flat === true;
    try {
      const input = await readInput(req, route, url, params, ctx);
      const output = await procedureOf(callerFactory(ctx), route)(input);
      if (route.meta.sse && isAsyncIterable(output)) return await streamEvents(res, output, ctx);
      if (route.meta.rawResponse) {
        const raw = output as { contentType: string; body: Uint8Array; cacheControl?: string };
        res.writeHead(200, { ...ctx.responseHeaders, 'Content-Type': raw.contentType, 'Content-Length': raw.body.byteLength, 'Cache-Control': raw.cacheControl ?? 'no-store', 'X-Content-Type-Options': 'nosniff' });
        res.end(method === 'HEAD' ? undefined : raw.body);
        return;
      }
      sendJson(res, ctx.response.status ?? route.meta.successStatus ?? 200, successBody(output, flat), ctx.responseHeaders);
    } catch (error) {
      const { appError, unexpected } = toClientError(error);
      if (unexpected) ctx.deps.errorReporter.capture(error instanceof Error && error.cause instanceof Error ? error.cause : error, { requestId: ctx.requestId, path: url.pathname, method });
      // A refused upload leaves body bytes unread: close the connection instead of parsing them as a request.
      if (appError.code === 'PAYLOAD_TOO_LARGE' || appError.code === 'UNSUPPORTED_MEDIA_TYPE') res.setHeader('Connection', 'close');
      sendError(res, appError, ctx.responseHeaders);
    }
  };
}
