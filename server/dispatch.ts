import type { IncomingMessage, ServerResponse } from 'node:http';
import { randomUUID } from 'node:crypto';
import { AppError } from '../schema/errors.ts';
import type { AppDeps, Context } from '../routers/context.ts';
import { resolveCaller } from '../routers/auth/caller.ts';
import { sendError } from '../adapters/rest/envelope.ts';

export type AdapterHandler = (req: IncomingMessage, res: ServerResponse, ctx: Context, url: URL) => Promise<void>;

const REQUEST_ID = /^[A-Za-z0-9._:-]{8,128}$/;
const HSTS = 'max-age=63072000; includeSubDomains';

export function createContext(deps: AppDeps, req: IncomingMessage, requestId: string, clientIp: string, signal?: AbortSignal): Context {
  const authorization = req.headers.authorization;
  let caller: ReturnType<Context['getCaller']> | undefined;
  return {
    deps,
    requestId,
    clientIp,
    authorization,
    responseHeaders: {},
    response: {},
    acceptsEventStream: /\btext\/event-stream\b/i.test(String(req.headers.accept ?? '')),
    signal,
    getCaller: () => (caller ??= resolveCaller(deps, authorization)),
  };
}

function clientIpOf(req: IncomingMessage, trustProxy: boolean) {
  if (trustProxy) {
    // The rightmost entry is the one our proxy added; anything left of it is the client's to invent.
    const forwarded = req.headers['x-forwarded-for'];
    const entries = (Array.isArray(forwarded) ? forwarded.join(',') : (forwarded ?? '')).split(',').map((e) => e.trim()).filter(Boolean);
    const last = entries.at(-1);
    if (last) return last;
  }
  return req.socket.remoteAddress ?? 'unknown';
}

/**
 * The request flow of the design: HTTPS check -> request id -> route to an adapter with a fresh context.
 * Every response carries X-Request-Id; secure ones carry HSTS.
 */
export function createDispatcher(deps: AppDeps, adapters: { rest: AdapterHandler; trpc: AdapterHandler; graphql: AdapterHandler }) {
  const trustProxy = deps.config.TRUST_PROXY;
  return (req: IncomingMessage, res: ServerResponse, secure: boolean) => {
    const incomingId = req.headers['x-request-id'];
    const requestId = typeof incomingId === 'string' && REQUEST_ID.test(incomingId) ? incomingId : randomUUID();
    res.setHeader('X-Request-Id', requestId);
    const proxiedHttps = trustProxy && String(req.headers['x-forwarded-proto'] ?? '').split(',')[0]?.trim() === 'https';
    let url: URL;
    try {
      url = new URL(req.url ?? '/', 'https://service.invalid');
    } catch {
      return sendError(res, new AppError('BAD_REQUEST', 'Malformed request URL'));
    }
    if (!secure && !proxiedHttps) {
      // API clients get an explicit error, never a redirect that would replay credentials in clear.
      res.setHeader('Connection', 'close');
      return sendError(res, new AppError('HTTPS_REQUIRED', 'HTTPS is required', 'Plain HTTP requests are rejected; use https://'));
    }
    res.setHeader('Strict-Transport-Security', HSTS);
    res.setHeader('X-Content-Type-Options', 'nosniff');

    const path = url.pathname;
    let adapter: AdapterHandler | undefined;
    if (path === '/api' || path.startsWith('/api/')) adapter = adapters.rest;
    else if (path.startsWith('/trpc/')) adapter = adapters.trpc;
    else if (path === '/graphql') adapter = adapters.graphql;
    else if (path === '/' && (req.method === 'GET' || req.method === 'HEAD')) {
      res.writeHead(302, { Location: '/api/v1/docs' });
      res.end();
      return;
    }
    if (!adapter) return sendError(res, new AppError('NOT_FOUND', 'Route not found', `${req.method} ${path}`));

    const abort = new AbortController();
    res.once('close', () => {
      if (!res.writableFinished) abort.abort();
    });
    const ctx = createContext(deps, req, requestId, clientIpOf(req, trustProxy), abort.signal);
    adapter(req, res, ctx, url).catch((error: unknown) => {
      deps.errorReporter.capture(error, { requestId, path, method: req.method });
      if (!res.headersSent) sendError(res, new AppError('INTERNAL_ERROR', 'Internal server error'));
      else res.destroy();
    });
  };
}
