/**
 * The single outbound HTTP client of the service (SSRF guard).
 *
 * Every owner-configured URL (AI endpoints, webhooks, error reporting) is
 * attacker-controlled, so this client:
 *  - accepts only http/https URLs without credentials;
 *  - refuses hosts whose literal or resolved addresses are not public
 *    (address-policy.ts), unless 'host:port' is explicitly allow-listed;
 *  - pins the connection to the address it checked, so a second DNS answer
 *    (DNS rebinding) can never be used;
 *  - never follows redirects, bounds the whole exchange by one deadline and
 *    caps the decompressed response size while streaming;
 *  - reuses connections only through a keep-alive agent dedicated to one
 *    checked target (protocol, pinned address, port, TLS servername and
 *    allow-list decision), so a pooled socket only ever serves requests whose
 *    own check produced that same address. Any response not read to its end
 *    (size cap, deadline, abort, destroyed stream, error) destroys its socket.
 */
import tls from 'node:tls';
import http from 'node:http';
import https from 'node:https';
import { lookup as dnsLookup } from 'node:dns/promises';
import type { LookupFunction } from 'node:net';
import { Transform, type Readable } from 'node:stream';
import zlib from 'node:zlib';
import { isPublicAddress, parseIpLiteral } from './address-policy.ts';

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

export interface GuardedClientOptions {
  /** 'host:port' entries exempt from the address rule (OUTBOUND_ALLOW_HOSTS; a development/testing aid). */
  allowHosts: string[];
  /** Whole request, connect to end of body. Default 30 s. */
  defaultTimeoutMs?: number;
  /** Cap on the body after decompression. Default 5 MiB. */
  maxResponseBytes?: number;
  userAgent?: string;
  /** PEM certificates trusted besides the system's roots (OUTBOUND_CA_FILE: a private ACME CA, say). */
  extraCa?: string;
  /** Told of every address refusal, with the host only (security monitoring); must not throw. */
  onBlocked?: (refusal: { host: string }) => void;
}

export interface GuardedRequest {
  method?: string;
  headers?: Record<string, string>;
  body?: string | Uint8Array;
  timeoutMs?: number;
  signal?: AbortSignal;
  maxResponseBytes?: number;
}

export interface GuardedResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
  text(): string;
  /** Throws on bad JSON. */
  json(): unknown;
  url: string;
}

export interface GuardedHttpClient {
  request(url: string, init?: GuardedRequest): Promise<GuardedResponse>;
  /**
   * For save-time validation: checks scheme (http/https only, no credentials in URL), resolves the host and refuses
   * non-public addresses. Throws OutboundError.
   */
  assertAllowed(url: string): Promise<void>;
  /** True when the URL's host:port is an OUTBOUND_ALLOW_HOSTS entry (exempt from the address rule). */
  isAllowListed(url: string): boolean;
  /** Same idea, streaming: returns status/headers and a Node Readable of the (decompressed, size-capped) body, for SSE upstreams. */
  stream(url: string, init?: GuardedRequest): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: Readable }>;
  /**
   * A TLS handshake with `https://host:port` under the same address rule, reporting the certificate served there
   * whether or not it is valid (the caller judges it): for reading what a proxy serves at a custom domain.
   */
  inspectTls(url: string, init?: TlsInspection): Promise<ServedCertificate>;
}

export interface TlsInspection {
  timeoutMs?: number;
  /** Resolves the host instead of the system's resolver (the service's DNS_SERVERS); its answers are checked the same way. */
  resolveAddresses?: (hostname: string) => Promise<string[]>;
}

export interface ServedCertificate {
  /** The leaf certificate, DER. */
  raw: Buffer;
  /** The chain verified against the trusted roots; hostname is not part of it (check with tls.checkServerIdentity). */
  chainTrusted: boolean;
  chainError: string | null;
  peer: tls.PeerCertificate;
}

const DEFAULT_TIMEOUT_MS = 30_000;
const DEFAULT_MAX_RESPONSE_BYTES = 5 * 1024 * 1024;
const DEFAULT_USER_AGENT = 'chat-interface-service';
// setTimeout silently turns larger delays into 1 ms.
const MAX_TIMER_MS = 2 ** 31 - 1;
// Headers the client owns: the caller must not be able to change the target
// (Host), the framing (Content-Length, Transfer-Encoding, Connection) or the
// encodings we know how to decode and cap. A caller's value for one is dropped
// (exported so callers that let owners name a header can refuse these names).
export const RESERVED_HEADERS: ReadonlySet<string> = new Set(['host', 'accept-encoding', 'content-length', 'transfer-encoding', 'connection']);
// Connection reuse: at most this many per-target agents are kept (LRU).
const MAX_POOLED_TARGETS = 128;
// Idle pooled sockets per target (at least the webhook workers of an instance); more are closed when released.
const MAX_FREE_SOCKETS_PER_TARGET = 16;
// An idle pooled socket is closed after this long (Node shortens it further
// when the server announces `Keep-Alive: timeout=N`). Kept below the common
// 5 s server default so a reused socket is rarely one the server is closing.
const POOLED_SOCKET_IDLE_MS = 4_000;

/**
 * A `lookup` for http(s).request that ignores the hostname and always answers
 * with the address that was already checked, so the socket cannot be pointed
 * elsewhere by a second DNS resolution.
 */
export function createPinnedLookup(address: string, family: 4 | 6): LookupFunction {
  return (_hostname, options, callback) => {
    // Real lookups answer asynchronously; net relies on that ordering.
    process.nextTick(() => {
      if (options.all) callback(null, [{ address, family }]);
      else callback(null, address, family);
    });
  };
}

export function createGuardedHttpClient(options: GuardedClientOptions): GuardedHttpClient {
  const allowed = new Set(
    options.allowHosts
      .map((entry) => entry.trim())
      .filter((entry) => entry !== '')
      .map(parseAllowEntry),
  );
  const defaultTimeoutMs = options.defaultTimeoutMs ?? DEFAULT_TIMEOUT_MS;
  const defaultMaxBytes = options.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES;
  const userAgent = options.userAgent ?? DEFAULT_USER_AGENT;
  const trustedRoots = options.extraCa ? [...tls.rootCertificates, options.extraCa] : undefined;
  const agents = new AgentPool(MAX_POOLED_TARGETS, trustedRoots);

  const blocked = (host: string, message: string) => {
    options.onBlocked?.({ host });
    return new OutboundError('blocked_address', message);
  };
  const systemAddresses = async (hostname: string) => (await dnsLookup(hostname, { all: true, verbatim: true })).map((a) => a.address);

  async function resolveTarget(url: URL, resolveAddresses: (hostname: string) => Promise<string[]> = systemAddresses): Promise<Target> {
    const hostname = stripBrackets(url.hostname);
    const port = effectivePort(url);
    const exempt = allowed.has(`${hostKey(hostname)}:${port}`);

    // Node skips DNS for literals, so the literal itself is what gets connected to.
    const literal = parseIpLiteral(hostname);
    if (literal !== null) {
      if (!exempt && !isPublicAddress(literal)) {
        throw blocked(hostname, `${describeOrigin(url)} is not a public address`);
      }
      return { connectHost: literal, address: literal, family: literal.includes(':') ? 6 : 4, servername: undefined, exempt };
    }

    let answers: string[];
    try {
      answers = await resolveAddresses(hostname);
    } catch (err) {
      throw new OutboundError('dns_failure', `could not resolve host ${hostname} (${errorCode(err) ?? 'lookup failed'})`);
    }
    const first = answers[0];
    if (first === undefined) throw new OutboundError('dns_failure', `host ${hostname} has no addresses`);
    // One bad answer refuses the host: otherwise an attacker mixes a public and
    // an internal record and wins whenever the internal one gets picked.
    // The address is deliberately left out of the message (no internal DNS oracle).
    for (const answer of answers) {
      const ip = parseIpLiteral(answer);
      if (ip === null || (!exempt && !isPublicAddress(ip))) {
        throw blocked(hostname, `host ${hostname} resolves to a non-public address`);
      }
    }
    return {
      connectHost: hostname,
      address: first,
      family: first.includes(':') ? 6 : 4,
      servername: hostname.replace(/\.$/, ''),
      exempt,
    };
  }

  async function open(urlText: string, init: GuardedRequest): Promise<Opened> {
    const url = validateUrl(urlText);
    const origin = describeOrigin(url);
    const isHttps = url.protocol === 'https:';
    const method = (init.method ?? 'GET').toUpperCase();
    const maxBytes = init.maxResponseBytes ?? defaultMaxBytes;
    const timeoutMs = init.timeoutMs ?? defaultTimeoutMs;
    if (init.signal?.aborted) throw new OutboundError('aborted', `request to ${origin} was aborted`);

    const exchange = new Exchange({ origin, isHttps }, timeoutMs, init.signal);
    const target = await exchange.race(resolveTarget(url));

    const headers: Record<string, string> = {};
    for (const [name, value] of Object.entries(init.headers ?? {})) {
      const lower = name.toLowerCase();
      if (!RESERVED_HEADERS.has(lower)) headers[lower] = value;
    }
    headers['host'] = url.host;
    headers['accept-encoding'] = 'gzip, deflate, br';
    headers['user-agent'] ??= userAgent;
    const body = init.body === undefined ? undefined : toBuffer(init.body);
    if (body !== undefined) headers['content-length'] = String(body.length);

    const port = effectivePort(url);
    const lookup = createPinnedLookup(target.address, target.family);
    const requestOptions: https.RequestOptions = {
      protocol: url.protocol,
      host: target.connectHost,
      port,
      method,
      path: `${url.pathname}${url.search}`,
      headers,
      // Shared only with requests whose own check produced the same target;
      // the agent itself is pinned to the checked address too.
      agent: agents.get(isHttps, target, port, lookup),
      lookup,
    };
    if (isHttps) {
      // Explicit so NODE_TLS_REJECT_UNAUTHORIZED=0 cannot weaken it; SNI and
      // certificate checks use the original hostname, not the pinned IP.
      requestOptions.rejectUnauthorized = true;
      if (target.servername !== undefined) requestOptions.servername = target.servername;
    }

    let req: http.ClientRequest;
    try {
      req = (isHttps ? https : http).request(requestOptions);
    } catch (err) {
      // An invalid method or header value is a programming error, not an
      // outbound failure: surface Node's TypeError unchanged.
      exchange.complete();
      throw err;
    }
    return exchange.race(
      new Promise<Opened>((resolve) => {
        req.on('error', (err) => exchange.fail(err));
        exchange.onFail((err) => req.destroy(err));
        req.on('response', (res) => {
          // Redirects are returned as they are: following one would need a new check.
          resolve(wireBody(res, req, exchange, { origin, url: url.href, method, maxBytes }));
        });
        req.end(body);
      }),
    );
  }

  return {
    async request(url, init = {}) {
      const opened = await open(url, init);
      const chunks: Buffer[] = [];
      const body = await new Promise<Buffer>((resolve, reject) => {
        opened.exchange.onFail(reject);
        opened.body.on('data', (chunk: Buffer) => chunks.push(chunk));
        opened.body.on('end', () => resolve(Buffer.concat(chunks)));
      });
      const origin = opened.origin;
      return {
        status: opened.status,
        headers: opened.headers,
        body,
        url: opened.url,
        text: () => body.toString('utf8'),
        json: () => {
          try {
            return JSON.parse(body.toString('utf8')) as unknown;
          } catch {
            // Do not echo upstream content into error messages.
            throw new SyntaxError(`response from ${origin} is not valid JSON`);
          }
        },
      };
    },

    async assertAllowed(urlText) {
      const url = validateUrl(urlText);
      const exchange = new Exchange({ origin: describeOrigin(url), isHttps: url.protocol === 'https:' }, defaultTimeoutMs, undefined);
      await exchange.race(resolveTarget(url));
      exchange.complete();
    },

    isAllowListed(urlText) {
      try {
        const url = new URL(urlText);
        return allowed.has(`${hostKey(stripBrackets(url.hostname))}:${effectivePort(url)}`);
      } catch {
        return false;
      }
    },

    async stream(url, init = {}) {
      const opened = await open(url, init);
      return { status: opened.status, headers: opened.headers, body: opened.body };
    },

    async inspectTls(urlText, init = {}) {
      const url = validateUrl(urlText);
      if (url.protocol !== 'https:') throw new OutboundError('invalid_url', 'only https URLs have a certificate to inspect');
      const exchange = new Exchange({ origin: describeOrigin(url), isHttps: true }, init.timeoutMs ?? defaultTimeoutMs, undefined);
      const target = await exchange.race(resolveTarget(url, init.resolveAddresses));
      const inspected = exchange.race(
        new Promise<ServedCertificate>((resolve) => {
          // Verification is judged, not enforced: a bad certificate is the answer, not an error.
          const socket = tls.connect({
            host: target.address,
            port: effectivePort(url),
            ...(target.servername ? { servername: target.servername } : {}),
            rejectUnauthorized: false,
            ...(trustedRoots ? { ca: trustedRoots } : {}),
          });
          exchange.onFail(() => socket.destroy());
          // Kept for the socket's whole life: a reset after the handshake must not become an unhandled error.
          socket.on('error', (err) => exchange.fail(err));
          socket.once('secureConnect', () => {
            const peer = socket.getPeerCertificate(false);
            const error = socket.authorizationError;
            resolve({ raw: peer.raw, chainTrusted: socket.authorized, chainError: error ? String(error) : null, peer });
            socket.end();
          });
        }),
      );
      const served = await inspected;
      exchange.complete();
      if (!served.raw) throw new OutboundError('tls_error', `${describeOrigin(url)} served no certificate`);
      return served;
    },
  };
}

// ---------------------------------------------------------------------------
// Internals

interface Target {
  /** Passed as `host`: a literal is connected to directly, a hostname goes through the pinned lookup. */
  connectHost: string;
  address: string;
  family: 4 | 6;
  servername: string | undefined;
  /** host:port was allow-listed (the address policy was not applied). */
  exempt: boolean;
}

/**
 * Keep-alive agents, one per checked target, least recently used evicted
 * first. Every option that decides where and how a socket connects (pinned
 * address, port, TLS servername and verification) is part of the key AND set
 * on the agent itself (agent options override request options when Node
 * creates a socket), so a socket in an agent can only reach that target.
 */
class AgentPool {
  private readonly agents = new Map<string, http.Agent>();

  constructor(
    private readonly max: number,
    private readonly ca?: string[],
  ) {}

  get(isHttps: boolean, target: Target, port: number, lookup: LookupFunction): http.Agent {
    const key = JSON.stringify([isHttps ? 'https' : 'http', target.address, target.family, port, target.servername ?? null, target.exempt]);
    const existing = this.agents.get(key);
    if (existing !== undefined) {
      // Refresh its LRU position.
      this.agents.delete(key);
      this.agents.set(key, existing);
      return existing;
    }
    const common: http.AgentOptions = {
      keepAlive: true,
      maxFreeSockets: MAX_FREE_SOCKETS_PER_TARGET,
      // Idle timeout: Node destroys a *free* socket when it fires; a socket in
      // use only gets an unobserved 'timeout' event (the Exchange deadline
      // bounds requests). Free sockets are also unref'd, so idle pooled
      // connections never keep the process alive.
      timeout: POOLED_SOCKET_IDLE_MS,
      lookup,
    };
    let agent: http.Agent;
    if (isHttps) {
      const tlsOptions: https.AgentOptions = { ...common, rejectUnauthorized: true, ...(this.ca ? { ca: this.ca } : {}) };
      if (target.servername !== undefined) tlsOptions.servername = target.servername;
      agent = new https.Agent(tlsOptions);
    } else {
      agent = new http.Agent(common);
    }
    this.agents.set(key, agent);
    if (this.agents.size > this.max) {
      const oldest = this.agents.keys().next().value;
      if (oldest !== undefined) {
        const evicted = this.agents.get(oldest);
        this.agents.delete(oldest);
        if (evicted !== undefined) retire(evicted);
      }
    }
    return agent;
  }
}

/**
 * Closes an evicted agent's idle sockets and stops it pooling the rest;
 * requests still running on it (e.g. a long SSE stream) are left to finish,
 * their sockets are then closed instead of kept.
 */
function retire(agent: http.Agent): void {
  agent.keepSocketAlive = () => false;
  for (const sockets of Object.values(agent.freeSockets)) {
    for (const socket of sockets ?? []) socket.destroy();
  }
}

interface Opened {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Readable;
  url: string;
  origin: string;
  exchange: Exchange;
}

interface ErrorContext {
  /** scheme://host:port only: paths and queries of webhook URLs often carry secrets. */
  origin: string;
  isHttps: boolean;
}

/**
 * One request's lifetime: a single deadline, the caller's AbortSignal, and
 * the first failure, which tears everything down exactly once.
 */
class Exchange {
  private failure: OutboundError | null = null;
  private settled = false;
  private readonly handlers: Array<(err: OutboundError) => void> = [];
  private readonly timer: NodeJS.Timeout;
  private readonly detachSignal: () => void;

  constructor(
    private readonly ctx: ErrorContext,
    timeoutMs: number,
    signal: AbortSignal | undefined,
  ) {
    const delay = Number.isFinite(timeoutMs) ? Math.min(Math.max(timeoutMs, 1), MAX_TIMER_MS) : MAX_TIMER_MS;
    this.timer = setTimeout(() => {
      this.fail(new OutboundError('timeout', `request to ${ctx.origin} timed out after ${timeoutMs} ms`));
    }, delay);
    if (signal) {
      const onAbort = (): void => this.fail(new OutboundError('aborted', `request to ${ctx.origin} was aborted`));
      signal.addEventListener('abort', onAbort, { once: true });
      this.detachSignal = () => signal.removeEventListener('abort', onAbort);
    } else {
      this.detachSignal = () => undefined;
    }
  }

  fail(err: unknown): void {
    if (this.settled) return;
    this.settled = true;
    const failure = toOutboundError(err, this.ctx);
    this.failure = failure;
    this.release();
    for (const handler of this.handlers.splice(0)) handler(failure);
  }

  complete(): void {
    if (this.settled) return;
    this.settled = true;
    this.handlers.length = 0;
    this.release();
  }

  /** Runs now if the exchange already failed, otherwise on failure. */
  onFail(handler: (err: OutboundError) => void): void {
    if (this.failure !== null) handler(this.failure);
    else if (!this.settled) this.handlers.push(handler);
  }

  /** Resolves with `work`, or rejects with the exchange's failure (timeout, abort, error) if that comes first. */
  race<T>(work: Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.onFail(reject);
      work.then(resolve, (err: unknown) => {
        this.fail(err);
        reject(this.failure ?? toOutboundError(err, this.ctx));
      });
    });
  }

  private release(): void {
    clearTimeout(this.timer);
    this.detachSignal();
  }
}

function wireBody(
  res: http.IncomingMessage,
  req: http.ClientRequest,
  exchange: Exchange,
  ctx: { origin: string; url: string; method: string; maxBytes: number },
): Opened {
  const status = res.statusCode ?? 0;
  const headers: Record<string, string | string[] | undefined> = { ...res.headers };

  res.on('error', (err) => exchange.fail(err));
  res.on('close', () => {
    if (!res.complete) {
      exchange.fail(new OutboundError('connection_failed', `connection to ${ctx.origin} closed before the response was complete`));
    }
  });

  // HEAD, 204 and 304 carry no body, whatever Content-Length/-Encoding they declare.
  const hasBody = ctx.method !== 'HEAD' && status !== 204 && status !== 304;
  let source: Readable = res;
  if (hasBody) {
    const codings = decodableCodings(res.headers['content-encoding']);
    if (codings !== null && codings.length > 0) {
      // Decoded body: the encoding and length headers no longer describe it.
      delete headers['content-encoding'];
      delete headers['content-length'];
      for (const coding of [...codings].reverse()) {
        const decoder = createDecoder(coding);
        decoder.on('error', () => {
          exchange.fail(new OutboundError('connection_failed', `could not decode the ${coding} response body from ${ctx.origin}`));
        });
        exchange.onFail(() => decoder.destroy());
        source = source.pipe(decoder);
      }
    } else {
      const declared = Number(res.headers['content-length']);
      if (Number.isFinite(declared) && declared > ctx.maxBytes) exchange.fail(tooLarge(ctx.origin, ctx.maxBytes));
    }
  }

  // Counts bytes after decompression; the first chunk over the cap tears the
  // exchange down, so a compression bomb is never inflated beyond ~cap + one chunk.
  let received = 0;
  let ended = false;
  const limiter = new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      received += chunk.length;
      if (received > ctx.maxBytes) {
        exchange.fail(tooLarge(ctx.origin, ctx.maxBytes));
        return;
      }
      callback(null, chunk);
    },
  });
  // An upstream failing must never crash the process through an unhandled
  // 'error' event; consumers still receive the error through their own listeners.
  limiter.on('error', () => undefined);
  limiter.on('end', () => {
    ended = true;
    exchange.complete();
  });
  limiter.on('close', () => {
    if (!ended) exchange.fail(new OutboundError('aborted', `response body from ${ctx.origin} was closed before it was read`));
  });
  exchange.onFail((err) => {
    req.destroy(err);
    limiter.destroy(err);
  });
  source.pipe(limiter);

  return { status, headers, body: limiter, url: ctx.url, origin: ctx.origin, exchange };
}

/** Codings to undo, outermost last; null when any coding is unknown (the raw bytes are then returned). */
function decodableCodings(header: string | undefined): string[] | null {
  if (header === undefined) return [];
  const codings = header
    .split(',')
    .map((c) => c.trim().toLowerCase())
    .filter((c) => c !== '' && c !== 'identity');
  const known = ['gzip', 'x-gzip', 'deflate', 'br'];
  // More than a few layers is not something a legitimate server sends.
  if (codings.length > 3 || codings.some((c) => !known.includes(c))) return null;
  return codings;
}

function createDecoder(coding: string): Transform {
  // Lenient flush like browsers: a truncated but otherwise valid stream yields what it has.
  if (coding === 'br') return zlib.createBrotliDecompress({ finishFlush: zlib.constants.BROTLI_OPERATION_FLUSH });
  if (coding === 'deflate') return createDeflateDecoder();
  return zlib.createGunzip({ finishFlush: zlib.constants.Z_SYNC_FLUSH });
}

/** HTTP "deflate" should be zlib-wrapped, but some servers send raw deflate; sniff the zlib header. */
function createDeflateDecoder(): Transform {
  let inner: zlib.Inflate | zlib.InflateRaw | null = null;
  const outer = new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      if (inner === null) {
        const b0 = chunk[0] ?? 0;
        const b1 = chunk[1] ?? 0;
        const zlibWrapped = (b0 & 0x0f) === 8 && (b0 * 256 + b1) % 31 === 0;
        inner = zlibWrapped
          ? zlib.createInflate({ finishFlush: zlib.constants.Z_SYNC_FLUSH })
          : zlib.createInflateRaw({ finishFlush: zlib.constants.Z_SYNC_FLUSH });
        inner.on('data', (out: Buffer) => {
          if (!outer.push(out)) inner?.pause();
        });
        inner.on('error', (err) => outer.destroy(err));
      }
      if (inner.write(chunk)) callback();
      else inner.once('drain', () => callback());
    },
    flush(callback) {
      if (inner === null) return callback();
      inner.once('end', () => callback());
      inner.end();
    },
    read(size) {
      inner?.resume();
      Transform.prototype._read.call(this, size);
    },
    destroy(err, callback) {
      inner?.destroy();
      callback(err);
    },
  });
  return outer;
}

function tooLarge(origin: string, maxBytes: number): OutboundError {
  return new OutboundError('response_too_large', `response from ${origin} exceeds ${maxBytes} bytes`);
}

function validateUrl(text: string): URL {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new OutboundError('invalid_url', 'URL is not valid');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new OutboundError('invalid_url', `URL scheme ${url.protocol} is not allowed (http and https only)`);
  }
  // Credentials in URLs leak into logs and are a classic parser-confusion vector.
  if (url.username !== '' || url.password !== '') {
    throw new OutboundError('invalid_url', 'URL must not contain credentials');
  }
  if (url.hostname === '') throw new OutboundError('invalid_url', 'URL has no host');
  return url;
}

function describeOrigin(url: URL): string {
  return `${url.protocol}//${url.hostname}:${effectivePort(url)}`;
}

function effectivePort(url: URL): number {
  if (url.port !== '') return Number(url.port);
  return url.protocol === 'https:' ? 443 : 80;
}

function stripBrackets(host: string): string {
  return host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
}

/** Same key for an allow-list entry and a URL hostname, whatever the IP spelling. */
function hostKey(host: string): string {
  const lower = stripBrackets(host.toLowerCase());
  return parseIpLiteral(lower) ?? lower;
}

function parseAllowEntry(entry: string): string {
  const match = /^(\[[^\]]+\]|.+):(\d{1,5})$/.exec(entry);
  const port = Number(match?.[2]);
  if (match === null || match[1] === undefined || port < 1 || port > 65535) {
    throw new Error(`invalid allowHosts entry "${entry}": expected host:port`);
  }
  return `${hostKey(match[1])}:${port}`;
}

function toBuffer(body: string | Uint8Array): Buffer {
  return typeof body === 'string' ? Buffer.from(body, 'utf8') : Buffer.from(body.buffer, body.byteOffset, body.byteLength);
}

function errorCode(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : undefined;
}

const TLS_CODE = /^(ERR_TLS_|ERR_SSL_)|CERT|SELF_SIGNED|UNABLE_TO_(GET|VERIFY|DECRYPT)|HOSTNAME_MISMATCH/;

function toOutboundError(err: unknown, ctx: ErrorContext): OutboundError {
  if (err instanceof OutboundError) return err;
  const code = errorCode(err);
  const message = err instanceof Error ? err.message : '';
  if ((code !== undefined && TLS_CODE.test(code)) || /SSL routines|certificate/i.test(message) || (ctx.isHttps && code === 'EPROTO')) {
    return new OutboundError('tls_error', `TLS with ${ctx.origin} failed (${code ?? 'handshake error'})`);
  }
  return new OutboundError('connection_failed', `connection to ${ctx.origin} failed (${code ?? 'network error'})`);
}
