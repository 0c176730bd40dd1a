/**
 * The single outbound HTTP client of the service (SSRF guard).
 *
 * Every owner-configured URL (AI endpoints, webhooks, error reporting) is
 * attacker-controlled, so this client:
 *  - accepts only http/https URLs without credentials;
 *  - refuses hosts whose literal or resolved addresses are not public
 *    (address-policy.ts, applied in target-check.ts), unless 'host:port' is
 *    explicitly allow-listed;
 *  - pins the connection to the address it checked, so a second DNS answer
 *    (DNS rebinding) can never be used (pinned-agents.ts);
 *  - never follows redirects, bounds the whole exchange by one deadline
 *    (exchange.ts) and caps the decompressed response size while streaming
 *    (response-body.ts);
 *  - reuses connections only through a keep-alive agent dedicated to one
 *    checked target (protocol, pinned address, port, TLS servername and
 *    allow-list decision), so a pooled socket only ever serves requests whose
 *    own check produced that same address. Any response not read to its end
 *    (size cap, deadline, abort, destroyed stream, error) destroys its socket.
 */
import tls from 'node:tls';
import http from 'node:http';
import https from 'node:https';
import type { Readable } from 'node:stream';
import { Exchange } from './exchange.ts';
import { OutboundError } from './outbound-error.ts';
import { AgentPool, createPinnedLookup, MAX_POOLED_TARGETS } from './pinned-agents.ts';
import { wireBody, type Opened } from './response-body.ts';
import { createTargetCheck, describeOrigin, effectivePort, validateUrl } from './target-check.ts';
import { parseUntrustedJson } from '../../../schema/text-input.ts';

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
// Headers the client owns: the caller must not be able to change the target
// (Host), the framing (Content-Length, Transfer-Encoding, Connection) or the
// encodings we know how to decode and cap. A caller's value for one is dropped
// (exported so callers that let owners name a header can refuse these names).
export const RESERVED_HEADERS: ReadonlySet<string> = new Set(['host', 'accept-encoding', 'content-length', 'transfer-encoding', 'connection']);

export function createGuardedHttpClient(options: GuardedClientOptions): GuardedHttpClient {
  const targets = createTargetCheck(options.allowHosts, options.onBlocked);
  const defaultTimeoutMs = options.defaultTimeoutMs ?? DEFAULT_TIMEOUT_MS;
  const defaultMaxBytes = options.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES;
  const userAgent = options.userAgent ?? DEFAULT_USER_AGENT;
  const trustedRoots = options.extraCa ? [...tls.rootCertificates, options.extraCa] : undefined;
  const agents = new AgentPool(MAX_POOLED_TARGETS, trustedRoots);

  async function open(urlText: string, init: GuardedRequest): Promise<Opened> {
    const url = validateUrl(urlText);
    const origin = describeOrigin(url);
    const isHttps = url.protocol === 'https:';
    const method = (init.method ?? 'GET').toUpperCase();
    const maxBytes = init.maxResponseBytes ?? defaultMaxBytes;
    const timeoutMs = init.timeoutMs ?? defaultTimeoutMs;
    if (init.signal?.aborted) throw new OutboundError('aborted', `request to ${origin} was aborted`);

    const exchange = new Exchange({ origin, isHttps }, timeoutMs, init.signal);
    const target = await exchange.race(targets.resolveTarget(url));

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
            return parseUntrustedJson(body.toString('utf8'));
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
      await exchange.race(targets.resolveTarget(url));
      exchange.complete();
    },

    isAllowListed(urlText) {
      return targets.isAllowListed(urlText);
    },

    async stream(url, init = {}) {
      const opened = await open(url, init);
      return { status: opened.status, headers: opened.headers, body: opened.body };
    },

    async inspectTls(urlText, init = {}) {
      const url = validateUrl(urlText);
      if (url.protocol !== 'https:') throw new OutboundError('invalid_url', 'only https URLs have a certificate to inspect');
      const exchange = new Exchange({ origin: describeOrigin(url), isHttps: true }, init.timeoutMs ?? defaultTimeoutMs, undefined);
      const target = await exchange.race(targets.resolveTarget(url, init.resolveAddresses));
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

function toBuffer(body: string | Uint8Array): Buffer {
  return typeof body === 'string' ? Buffer.from(body, 'utf8') : Buffer.from(body.buffer, body.byteOffset, body.byteLength);
}
