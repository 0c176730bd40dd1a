import { Agent, request as httpsRequest } from 'node:https';
import { connect as tlsConnect } from 'node:tls';

/**
 * HTTPS requests with exact bytes, for fuzzing: the path is sent as given (no URL normalisation, so `..%2F`
 * and `%00` reach the server untouched), the body is sent byte for byte (invalid UTF-8 included), and every
 * request has a client deadline, so a request the server never answers is reported instead of hanging the test.
 * The test-app helper is right for ordinary tests; it normalises paths and waits for ever.
 */

export interface RawResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
  /** Parsed JSON body (undefined when the body is not JSON). */
  body: unknown;
}

/** Either a response, or why there was none (`timeout after N ms`, `ECONNRESET`, `closed without a response`). */
export interface RawOutcome {
  response?: RawResponse;
  failure?: string;
  elapsedMs: number;
}

export interface RawRequest {
  method: string;
  /** Path and query, sent verbatim (must be printable ASCII: percent-encode anything else). */
  path: string;
  headers?: Record<string, string>;
  body?: Buffer;
  timeoutMs: number;
}

const fuzzAgent = new Agent({ keepAlive: true, rejectUnauthorized: false, maxSockets: 8, timeout: 3_000 });

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

export function sendRaw(baseUrl: string, request: RawRequest): Promise<RawOutcome> {
  const url = new URL(baseUrl);
  const started = Date.now();
  const headers: Record<string, string> = { ...request.headers };
  if (request.body !== undefined) headers['content-length'] = String(request.body.length);
  return new Promise((resolve) => {
    let settled = false;
    const finish = (outcome: Omit<RawOutcome, 'elapsedMs'>) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve({ ...outcome, elapsedMs: Date.now() - started });
    };
    const req = httpsRequest({ host: url.hostname, port: url.port, method: request.method, path: request.path, headers, agent: fuzzAgent }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        finish({ response: { status: res.statusCode ?? 0, headers: res.headers, text, body: parseJson(text) } });
      });
      res.on('error', (error) => finish({ failure: `response stream: ${(error as NodeJS.ErrnoException).code ?? error.message}` }));
    });
    const timer = setTimeout(() => {
      finish({ failure: `no response within ${request.timeoutMs} ms` });
      req.destroy();
    }, request.timeoutMs);
    // An early answer (413 while the body is still being written) can be followed by EPIPE: the answer counts.
    req.on('error', (error) => finish({ failure: (error as NodeJS.ErrnoException).code ?? error.message }));
    req.end(request.body);
  });
}

export interface TruncatedRequest {
  method: string;
  path: string;
  headers: Record<string, string>;
  /** The bytes actually sent. */
  body: Buffer;
  /** The Content-Length announced (larger than body.length). */
  declaredLength: number;
  timeoutMs: number;
}

/** What happened to a request whose body ended early: an answer, a close by the server, or nothing in time. */
export interface TruncatedOutcome {
  response?: RawResponse;
  closedByServer: boolean;
  timedOut: boolean;
  elapsedMs: number;
}

/**
 * Announces `declaredLength` bytes, sends fewer, then ends the request (TLS close_notify and FIN on our side),
 * over node:tls because an HTTP client refuses to send a body shorter than its Content-Length.
 */
export function sendTruncated(baseUrl: string, request: TruncatedRequest): Promise<TruncatedOutcome> {
  const url = new URL(baseUrl);
  const started = Date.now();
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let settled = false;
    const socket = tlsConnect({ host: url.hostname, port: Number(url.port), rejectUnauthorized: false });
    const finish = (closedByServer: boolean, timedOut: boolean) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      resolve({ response: parseRawResponse(Buffer.concat(chunks)), closedByServer, timedOut, elapsedMs: Date.now() - started });
    };
    const timer = setTimeout(() => finish(false, true), request.timeoutMs);
    socket.on('secureConnect', () => {
      const head = [`${request.method} ${request.path} HTTP/1.1`, `Host: ${url.host}`, 'Connection: close', `Content-Length: ${request.declaredLength}`];
      for (const [name, value] of Object.entries(request.headers)) head.push(`${name}: ${value}`);
      socket.write(`${head.join('\r\n')}\r\n\r\n`);
      socket.end(request.body);
    });
    socket.on('data', (c: Buffer) => {
      chunks.push(c);
      // A complete answer is enough; the server may keep the socket open a little longer.
      const parsed = parseRawResponse(Buffer.concat(chunks));
      if (parsed && isComplete(Buffer.concat(chunks))) finish(false, false);
    });
    socket.on('end', () => finish(true, false));
    socket.on('close', () => finish(true, false));
    socket.on('error', () => finish(true, false));
  });
}

function splitHead(raw: Buffer): { head: string; body: Buffer } | undefined {
  const end = raw.indexOf('\r\n\r\n');
  if (end < 0) return undefined;
  return { head: raw.subarray(0, end).toString('latin1'), body: raw.subarray(end + 4) };
}

function isComplete(raw: Buffer): boolean {
  const parts = splitHead(raw);
  if (!parts) return false;
  const length = /\r\ncontent-length:\s*(\d+)/i.exec(parts.head);
  if (length) return parts.body.length >= Number(length[1]);
  if (/\r\ntransfer-encoding:\s*chunked/i.test(parts.head)) return parts.body.includes('\r\n0\r\n\r\n') || parts.body.subarray(0, 3).toString() === '0\r\n';
  return false;
}

function dechunk(body: Buffer): Buffer {
  const out: Buffer[] = [];
  let offset = 0;
  while (offset < body.length) {
    const lineEnd = body.indexOf('\r\n', offset);
    if (lineEnd < 0) break;
    const size = parseInt(body.subarray(offset, lineEnd).toString('latin1'), 16);
    if (!size) break;
    out.push(body.subarray(lineEnd + 2, lineEnd + 2 + size));
    offset = lineEnd + 2 + size + 2;
  }
  return Buffer.concat(out);
}

/** A minimal HTTP/1.1 response parser (status, headers, Content-Length or chunked body). */
export function parseRawResponse(raw: Buffer): RawResponse | undefined {
  const parts = splitHead(raw);
  if (!parts) return undefined;
  const [statusLine, ...headerLines] = parts.head.split('\r\n');
  const match = /^HTTP\/1\.[01] (\d{3})/.exec(statusLine ?? '');
  if (!match) return undefined;
  const headers: Record<string, string> = {};
  for (const line of headerLines) {
    const colon = line.indexOf(':');
    if (colon > 0) headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  const body = /chunked/i.test(headers['transfer-encoding'] ?? '') ? dechunk(parts.body) : parts.body;
  const text = body.toString('utf8');
  return { status: Number(match[1]), headers, text, body: parseJson(text) };
}
