import { findChallenge } from '../routers/domains/certificate-repository.ts';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { randomUUID } from 'node:crypto';
import { AppError } from '../schema/errors.ts';
import type { AppDeps, Context } from '../routers/context.ts';
import { bearerToken, resolveCaller } from '../routers/auth/caller.ts';
import { sameSecret } from '../adapters/outbound/secrets.ts';
import { sendError } from '../adapters/inbound/envelope.ts';
import { HTTP_STATUS } from '../adapters/inbound/http-status.ts';
import { attachBodyLease, createBodyBudget } from '../adapters/inbound/request-body.ts';
import { clientKey } from '../adapters/outbound/rate-limit/client-key.ts';
import { limitBodyIdleTime } from './listener.ts';

export type AdapterHandler = (req: IncomingMessage, res: ServerResponse, ctx: Context, url: URL) => Promise<void>;

const ignoreStreamError = () => {};

/** How much of a refused body is read and thrown away, at most, so that the client can read our answer. */
const LINGER_MAX_BYTES = 128 * 1024 * 1024;
const LINGER_MAX_MS = 30_000;

/**
 * An answer sent before the body was read (413, 415, 401 to an upload) leaves a client that is still sending.
 * Closing at once makes the kernel reset the connection, and clients that write the whole body before reading
 * (Python's requests, Node's http under some timings) report the reset instead of our answer. As mature servers
 * do, the rest of the body is read and discarded within a budget of bytes and time, then the connection goes on
 * (or is closed once the budget is spent).
 */
function lingerOnUnreadBody(req: IncomingMessage) {
  let drained = 0;
  const giveUp = () => req.socket.destroy();
  const timer = setTimeout(giveUp, LINGER_MAX_MS);
  timer.unref();
  req.on('data', (chunk: Buffer) => {
    drained += chunk.length;
    if (drained > LINGER_MAX_BYTES) giveUp();
  });
  req.once('close', () => clearTimeout(timer));
  req.resume();
}

const REQUEST_ID = /^[A-Za-z0-9._:-]{8,128}$/;
const DOT_SEGMENT = /\/(?:\.|%2e){1,2}(?:\/|$)/i;
/**
 * includeSubDomains only on the service's own hosts (PUBLIC_ORIGINS): on an owner's custom domain, an apex above
 * all, it would force HTTPS for two years on every subdomain of theirs, none of which we serve. Without
 * PUBLIC_ORIGINS the service cannot tell its own hosts from an owner's, so no host gets it.
 */
const HSTS_SERVICE = 'max-age=63072000; includeSubDomains';
const HSTS_OTHER = 'max-age=63072000';

export function createContext(deps: AppDeps, req: IncomingMessage, requestId: string, clientIp: string, signal?: AbortSignal): Context {
  const authorization = req.headers.authorization;
  let caller: ReturnType<Context['getCaller']> | undefined;
  return {
    deps,
    requestId,
    clientIp,
    origin: typeof req.headers.origin === 'string' ? req.headers.origin : undefined,
    host: req.headers.host,
    authorization,
    responseHeaders: {},
    response: {},
    acceptsEventStream: /\btext\/event-stream\b/i.test(String(req.headers.accept ?? '')),
    signal,
    getCaller: () => (caller ??= resolveCaller(deps, authorization, clientIp)),
  };
}

function clientIpOf(req: IncomingMessage, trustProxy: boolean) {
  if (trustProxy) {
    // The rightmost entry is the one our proxy added; anything left of it is the client's to invent.
    const forwarded = req.headers['x-forwarded-for'];
    const entries = (Array.isArray(forwarded) ? forwarded.join(',') : (forwarded ?? ''))
      .split(',')
      .map((e) => e.trim())
      .filter(Boolean);
    const last = entries.at(-1);
    if (last) return last;
  }
  return req.socket.remoteAddress ?? 'unknown';
}

const ACME_CHALLENGE_PATH = '/.well-known/acme-challenge/';

async function answerAcmeChallenge(deps: AppDeps, res: ServerResponse, token: string) {
  try {
    const keyAuthorization = /^[A-Za-z0-9_-]{1,256}$/.test(token) ? await findChallenge(deps.database.db, token) : undefined;
    res.writeHead(keyAuthorization ? 200 : HTTP_STATUS.NOT_FOUND, { 'Content-Type': 'text/plain; charset=utf-8', 'Cache-Control': 'no-store' });
    res.end(keyAuthorization ?? 'unknown challenge');
  } catch (error) {
    deps.errorReporter.capture(error, { path: ACME_CHALLENGE_PATH });
    if (!res.headersSent) res.writeHead(HTTP_STATUS.SERVICE_UNAVAILABLE, { 'Content-Type': 'text/plain; charset=utf-8' });
    res.end();
  }
}

/**
 * GET /metrics for Prometheus, with `Authorization: Bearer <METRICS_TOKEN>` (compared in constant time); without
 * a configured token the route does not exist.
 */
async function serveMetrics(deps: AppDeps, req: IncomingMessage, res: ServerResponse) {
  const token = deps.config.METRICS_TOKEN;
  if (!token) return sendError(res, new AppError('NOT_FOUND', 'Route not found', `${req.method} /metrics`));
  if (!sameSecret(bearerToken(req.headers.authorization) ?? '', token)) {
    return sendError(res, new AppError('UNAUTHORIZED', 'Authentication required', 'Send Authorization: Bearer <METRICS_TOKEN>'));
  }
  const body = await deps.metrics.registry.metrics();
  res.writeHead(200, { 'Content-Type': deps.metrics.registry.contentType, 'Cache-Control': 'no-store' });
  res.end(body);
}

/**
 * The request flow of the design: HTTPS check -> request id -> route to an adapter with a fresh context.
 * Every response carries X-Request-Id; secure ones carry HSTS.
 */
export function createDispatcher(
  deps: AppDeps,
  adapters: { rest: AdapterHandler; trpc: AdapterHandler; graphql: AdapterHandler; web: { matches(path: string): boolean; handle: AdapterHandler } },
) {
  const trustProxy = deps.config.TRUST_PROXY;
  const serviceHosts = new Set(deps.config.PUBLIC_ORIGINS.map((o) => new URL(o).hostname.toLowerCase()));
  const hstsFor = (host: string | undefined) => {
    const hostname = String(host ?? '')
      .replace(/:\d+$/, '')
      .replace(/\.$/, '')
      .toLowerCase();
    return serviceHosts.has(hostname) ? HSTS_SERVICE : HSTS_OTHER;
  };
  // One per instance: every body the adapters buffer is held on it, per client as rate limiting counts clients.
  const bodies = createBodyBudget({ instanceBytes: deps.config.BODY_MEMORY_LIMIT_BYTES, perClientBytes: deps.config.BODY_MEMORY_PER_CLIENT_BYTES });
  return (req: IncomingMessage, res: ServerResponse, secure: boolean) => {
    // The adapters read and write these streams; a reset mid-body must never surface as an unhandled 'error'
    // event (which ends the process). Readers still see the failure through their own iteration or listeners.
    req.on('error', ignoreStreamError);
    res.on('error', ignoreStreamError);
    limitBodyIdleTime(req, res, deps.config.BODY_IDLE_TIMEOUT_MS);
    const started = process.hrtime.bigint();
    let route = 'unmatched';
    let context: Context | undefined;
    res.once('finish', () => {
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      // The operation's template once the REST adapter matched one, else the interface it went to.
      deps.metrics.observeRequest({ method: req.method ?? 'GET', route: context?.routeTemplate ?? route, status: res.statusCode }, seconds);
    });
    const incomingId = req.headers['x-request-id'];
    const requestId = typeof incomingId === 'string' && REQUEST_ID.test(incomingId) ? incomingId : randomUUID();
    res.setHeader('X-Request-Id', requestId);
    // Every answer, the early ones below included, leaves an unread body to the same bounded drain.
    res.once('finish', () => {
      if (!req.complete) lingerOnUnreadBody(req);
    });
    const proxiedHttps =
      trustProxy &&
      String(req.headers['x-forwarded-proto'] ?? '')
        .split(',')[0]
        ?.trim() === 'https';
    // RFC 9112: an HTTP/1.1 request without Host is a 400 (the listener lets it through for this envelope).
    if (req.headers.host === undefined && req.httpVersionMajor === 1 && req.httpVersionMinor >= 1) {
      res.setHeader('Connection', 'close');
      return sendError(res, new AppError('BAD_REQUEST', 'Malformed HTTP request', 'An HTTP/1.1 request must carry a Host header'));
    }
    let url: URL;
    try {
      url = new URL(req.url ?? '/', 'https://service.invalid');
    } catch {
      return sendError(res, new AppError('BAD_REQUEST', 'Malformed request URL'));
    }
    if (!secure && url.pathname.startsWith(ACME_CHALLENGE_PATH) && (req.method === 'GET' || req.method === 'HEAD')) {
      // HTTP-01: the CA fetches the key authorization over plain HTTP (port 80 forwarded to this listener).
      return void answerAcmeChallenge(deps, res, url.pathname.slice(ACME_CHALLENGE_PATH.length));
    }
    if (!secure && !proxiedHttps) {
      // API clients get an explicit error, never a redirect that would replay credentials in clear.
      res.setHeader('Connection', 'close');
      return sendError(res, new AppError('HTTPS_REQUIRED', 'HTTPS is required', 'Plain HTTP requests are rejected; use https://'));
    }
    res.setHeader('Strict-Transport-Security', hstsFor(req.headers.host));
    res.setHeader('X-Content-Type-Options', 'nosniff');
    // Answers carry owners' data and secrets shown once: no shared or browser cache may keep them. The few
    // cacheable answers (documents, the public avatar) set their own.
    res.setHeader('Cache-Control', 'no-store');

    // The URL parser resolves `.` and `..` segments, encoded ones too: /api/v1/chat/%2e%2e/leads would reach
    // /api/v1/leads. No route of ours has such a segment, so a path with one names nothing.
    if (DOT_SEGMENT.test((req.url ?? '/').split('?')[0] ?? '')) {
      return sendError(res, new AppError('NOT_FOUND', 'Route not found', 'The path has a . or .. segment'));
    }
    const path = url.pathname;
    if (path === '/metrics' && (req.method === 'GET' || req.method === 'HEAD')) {
      route = '/metrics';
      return void serveMetrics(deps, req, res).catch(() => {
        if (!res.headersSent) sendError(res, new AppError('INTERNAL_ERROR', 'Internal server error'));
      });
    }
    let adapter: AdapterHandler | undefined;
    if (path === '/api' || path.startsWith('/api/')) adapter = adapters.rest;
    else if (path.startsWith('/trpc/')) adapter = adapters.trpc;
    else if (path === '/graphql') adapter = adapters.graphql;
    else if (adapters.web.matches(path)) adapter = adapters.web.handle;
    if (!adapter) return sendError(res, new AppError('NOT_FOUND', 'Route not found', `${req.method} ${path}`));

    const clientIp = clientIpOf(req, trustProxy);
    const lease = bodies.lease(clientKey(clientIp));
    attachBodyLease(req, lease);
    const abort = new AbortController();
    // 'close' comes once on every path (answered, client gone, timed out, socket error): the one release that
    // always happens. A reader that drops what it read releases earlier; a second release does nothing.
    res.once('close', () => {
      lease.release();
      if (!res.writableFinished) abort.abort();
    });
    const ctx = createContext(deps, req, requestId, clientIp, abort.signal);
    context = ctx;
    route = adapter === adapters.rest ? '/api (unmatched)' : adapter === adapters.trpc ? '/trpc' : adapter === adapters.graphql ? '/graphql' : 'web';
    adapter(req, res, ctx, url).catch((error: unknown) => {
      deps.errorReporter.capture(error, { requestId, path, method: req.method });
      if (!res.headersSent) sendError(res, new AppError('INTERNAL_ERROR', 'Internal server error'));
      else res.destroy();
    });
  };
}
