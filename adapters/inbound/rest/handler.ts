import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AnyRouter } from '@trpc/server';
import { AppError } from '../../../schema/errors.ts';
import type { Context } from '../../../routers/context.ts';
import { readJsonBody, readRawTextBody } from '../request-body.ts';
import { sendError, sendJson, successBody } from '../envelope.ts';
import { toClientError } from '../client-error.ts';
import { ifNoneMatchIncludes } from '../conditional-request.ts';
import { legacyLookup, type LegacyRoute } from './legacy.ts';
import { readMultipart } from './multipart.ts';
import { buildRouteTable, type RestRoute } from './routes.ts';
import { streamEvents } from './sse.ts';
import { procedureRunner } from './call-procedure.ts';
import { PLAN_RULES } from '../../../schema/plans.ts';
import { enforceRateLimit } from '../../../routers/trpc.ts';

/** The rate-limit name of requests that name no operation: not a procedure path (no procedure has parentheses), no colon. */
const UNMATCHED_OPERATION = '(unmatched)';
/** The rate-limit name of the documents (openapi.json, the docs page and its assets), a budget of the default size. */
const DOCUMENTS = '(documents)';

const isAsyncIterable = (value: unknown): value is AsyncIterable<unknown> => typeof value === 'object' && value !== null && Symbol.asyncIterator in value;

export interface RestHandlerOptions {
  router: AnyRouter;
  legacyRoutes: LegacyRoute[];
  jsonBodyLimitBytes: number;
  /**
   * Non-procedure documents (openapi.json, the docs page and its assets) keyed by path; a key ending in `/`
   * serves every path below it, and its source gets the rest of the path (undefined: 404).
   */
  documents: Record<string, DocumentSource>;
}

export interface RestDocument {
  contentType: string;
  body: string | Buffer;
  headers?: Record<string, string>;
  /** Default `no-cache`: revalidated on every use. */
  cacheControl?: string;
  etag?: string;
  /** The same body gzip-compressed, sent to clients that accept it. */
  gzip?: () => Buffer;
}

export type DocumentSource = (subPath: string) => RestDocument | undefined | Promise<RestDocument | undefined>;

function findDocument(documents: Record<string, DocumentSource>, path: string): { source: DocumentSource; subPath: string } | undefined {
  const exact = documents[path];
  if (exact) return { source: exact, subPath: '' };
  for (const [key, source] of Object.entries(documents)) {
    if (key.endsWith('/') && path.startsWith(key) && path.length > key.length) return { source, subPath: path.slice(key.length) };
  }
  return undefined;
}

function sendDocument(req: IncomingMessage, res: ServerResponse, doc: RestDocument, rateLimitHeaders: Record<string, string>): void {
  const headers: Record<string, string> = {
    ...rateLimitHeaders,
    ...doc.headers,
    'Content-Type': doc.contentType,
    'Cache-Control': doc.cacheControl ?? 'no-cache',
  };
  if (doc.etag) {
    headers.ETag = doc.etag;
    if (ifNoneMatchIncludes(req, doc.etag)) {
      res.writeHead(304, headers);
      res.end();
      return;
    }
  }
  let body = doc.body;
  if (doc.gzip) {
    headers.Vary = 'Accept-Encoding';
    if (/\bgzip\b/i.test(String(req.headers['accept-encoding'] ?? ''))) {
      body = doc.gzip();
      headers['Content-Encoding'] = 'gzip';
    }
  }
  res.writeHead(200, { ...headers, 'Content-Length': String(Buffer.byteLength(body)) });
  res.end(req.method === 'HEAD' ? undefined : body);
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
  const runners = new Map(table.routes.map((route) => [route.procedurePath, procedureRunner(options.router, route.procedurePath)]));

  async function readInput(req: IncomingMessage, route: RestRoute, url: URL, params: Record<string, string>, ctx: Context) {
    const method = req.method ?? 'GET';
    let input: Record<string, unknown>;
    if (route.meta.multipart) {
      // Who is uploading decides the cap, and anonymous uploads are never read: the procedure answers 401.
      const caller = await ctx.getCaller();
      if (caller.kind !== 'owner') return { ...params };
      // Limited before the body is read: a refused upload costs no memory.
      // Marked before it is counted: a refusal here must not be counted again by readInputCounted.
      ctx.rateLimitPrecounted = route.procedurePath;
      await enforceRateLimit(ctx, route.meta.rateLimit ?? 'default', route.procedurePath, route.meta.auth);
      const { fileField, maxBytes } = route.meta.multipart;
      input = await readMultipart(req, { fileField, maxBytes: maxBytes === 'plan' ? PLAN_RULES[caller.owner.plan].uploadBytes : maxBytes });
    } else if (route.meta.rawBody) {
      const signature = req.headers[route.meta.rawBody.signatureHeader.toLowerCase()];
      input = { payload: await readRawTextBody(req, options.jsonBodyLimitBytes), signature: typeof signature === 'string' ? signature : '' };
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

  /**
   * A body refused before its procedure runs (malformed, too large, of the wrong type) is still a request of the caller's
   * budget and carries the rate-limit headers every REST answer has; past the limit it is the 429. An upload counted
   * before its body was read is not counted twice.
   */
  async function readInputCounted(req: IncomingMessage, route: RestRoute, url: URL, params: Record<string, string>, ctx: Context) {
    try {
      return await readInput(req, route, url, params, ctx);
    } catch (error) {
      if (ctx.rateLimitPrecounted !== route.procedurePath) await enforceRateLimit(ctx, route.meta.rateLimit ?? 'default', route.procedurePath, route.meta.auth);
      throw error;
    }
  }

  /** Unexpected errors are reported (and become a 500); every answer carries the rate-limit headers counted so far. */
  function sendFailure(res: ServerResponse, ctx: Context, url: URL, method: string, error: unknown) {
    const { appError, unexpected } = toClientError(error);
    if (unexpected)
      ctx.deps.errorReporter.capture(error instanceof Error && error.cause instanceof Error ? error.cause : error, {
        requestId: ctx.requestId,
        path: url.pathname,
        method,
      });
    sendError(res, appError, ctx.responseHeaders);
  }

  /**
   * A request that names no operation (unknown route, wrong method) is still a request of the caller's budget and
   * carries the rate-limit headers every REST answer has; past the limit it is the 429. All of a caller's such requests
   * share one count under a name no procedure has, so a scanner makes no new keys and spends no operation's budget.
   */
  async function refuseUnmatched(res: ServerResponse, ctx: Context, url: URL, method: string, refusal: AppError, headers: Record<string, string> = {}) {
    try {
      await enforceRateLimit(ctx, 'default', UNMATCHED_OPERATION);
    } catch (error) {
      return sendFailure(res, ctx, url, method, error);
    }
    sendError(res, refusal, { ...ctx.responseHeaders, ...headers });
  }

  return async function handleRest(req: IncomingMessage, res: ServerResponse, ctx: Context, url: URL): Promise<void> {
    const method = req.method ?? 'GET';
    const document = findDocument(options.documents, url.pathname);
    if (document && (method === 'GET' || method === 'HEAD')) {
      const doc = await document.source(document.subPath);
      if (!doc) return refuseUnmatched(res, ctx, url, method, new AppError('NOT_FOUND', 'Route not found', `${url.pathname} is not a document`));
      // Every answer under /api carries the rate-limit headers (the spec), and the largest document is not free to
      // fetch in a loop: the documents share one budget per caller.
      try {
        await enforceRateLimit(ctx, 'default', DOCUMENTS);
      } catch (error) {
        return sendFailure(res, ctx, url, method, error);
      }
      return sendDocument(req, res, doc, ctx.responseHeaders);
    }
    const legacyTarget = legacy(method, url.pathname);
    const match = table.match(method === 'HEAD' ? 'GET' : method, legacyTarget ?? url.pathname);
    if (!match)
      return refuseUnmatched(res, ctx, url, method, new AppError('NOT_FOUND', 'Route not found', `${method} ${url.pathname} is not an API operation`));
    if ('allowed' in match) {
      const allow = match.allowed.join(', ');
      return refuseUnmatched(res, ctx, url, method, new AppError('METHOD_NOT_ALLOWED', 'Method not allowed', `${url.pathname} accepts ${allow}`), {
        Allow: allow,
      });
    }
    const { route, params } = match;
    ctx.routeTemplate = route.path;
    const flat = legacyTarget !== undefined || route.meta.flat === true;
    try {
      const input = await readInputCounted(req, route, url, params, ctx);
      const output = await runners.get(route.procedurePath)!(ctx, input);
      if (route.meta.sse && isAsyncIterable(output)) return await streamEvents(res, output, ctx);
      if (route.meta.rawResponse) {
        const raw = output as { contentType: string; body: Uint8Array; cacheControl?: string };
        res.writeHead(200, {
          ...ctx.responseHeaders,
          'Content-Type': raw.contentType,
          'Content-Length': raw.body.byteLength,
          'Cache-Control': raw.cacheControl ?? 'no-store',
          'X-Content-Type-Options': 'nosniff',
        });
        res.end(method === 'HEAD' ? undefined : raw.body);
        return;
      }
      sendJson(res, ctx.response.status ?? route.meta.successStatus ?? 200, successBody(output, flat), ctx.responseHeaders);
    } catch (error) {
      sendFailure(res, ctx, url, method, error);
    }
  };
}
