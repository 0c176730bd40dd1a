import type { SecureContext } from 'node:tls';
import { createServer as createHttpServer, STATUS_CODES, type IncomingMessage, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { createServer as createNetServer, type Server, type Socket } from 'node:net';
import type { TlsMaterial } from './tls.ts';
import { AppError } from '../schema/errors.ts';
import { HTTP_STATUS } from '../adapters/inbound/http-status.ts';
import { errorBody } from '../adapters/inbound/envelope.ts';

export type RequestHandler = (req: IncomingMessage, res: ServerResponse, secure: boolean) => void;

const TLS_HANDSHAKE = 0x16;

/** How long a connection may take over each step before it is answered 408 or closed. */
export interface ListenerTimeouts {
  /** From accepting the connection to its first byte. */
  firstByteMs: number;
  /** From the first byte of a TLS connection to the end of its handshake (a hard deadline, not an idle timer). */
  handshakeMs: number;
  /** From a request's first byte to the end of its headers (then 408). */
  headersMs: number;
  /** From a request's first byte to the end of its body (then 408). */
  requestMs: number;
  /** How often node:http looks for requests past those two limits. */
  checkIntervalMs: number;
  /** An idle keep-alive connection is closed after this. */
  keepAliveMs: number;
}

export const DEFAULT_LISTENER_TIMEOUTS: ListenerTimeouts = {
  firstByteMs: 10_000,
  handshakeMs: 15_000,
  headersMs: 20_000,
  requestMs: 900_000,
  checkIntervalMs: 5_000,
  keepAliveMs: 5_000,
};

/** Our own code for a body that stopped arriving (limitBodyIdleTime), answered like Node's request timeout. */
const BODY_IDLE = 'ERR_BODY_IDLE';

const CLIENT_ERRORS: Record<string, AppError> = {
  HPE_HEADER_OVERFLOW: new AppError('HEADERS_TOO_LARGE', 'Request headers too large', 'Headers are limited to 16 KiB'),
  ERR_HTTP_REQUEST_TIMEOUT: new AppError('REQUEST_TIMEOUT', 'Request timeout', 'The request was not received in time'),
  [BODY_IDLE]: new AppError('REQUEST_TIMEOUT', 'Request timeout', 'The request body stopped arriving'),
};

/**
 * After an error answer the client may still be sending what was refused (the rest of oversized headers). Closing
 * with unread bytes makes the kernel reset the connection, and a client that writes everything before reading (curl)
 * then loses our answer. So the socket is half-closed and what arrives is read and discarded (Node's parser keeps
 * consuming it, failing again on each chunk) until the client closes, within a budget of bytes and time.
 */
const ANSWERED_LINGER_MS = 5_000;
const ANSWERED_LINGER_BYTES = 1024 * 1024;
const answeredAt = new WeakMap<Socket, number>();

/**
 * A request Node's parser refuses (a malformed request line, an invalid header character such as NUL, headers
 * too large, a timeout) never reaches our dispatch: answer it with the same error envelope instead of Node's
 * bare `400 Bad Request`, then close, since the rest of the stream cannot be trusted.
 */
function answerClientError(error: NodeJS.ErrnoException, socket: Socket) {
  const answeredBytes = answeredAt.get(socket);
  if (answeredBytes !== undefined) {
    if (socket.bytesRead - answeredBytes > ANSWERED_LINGER_BYTES) socket.destroy();
    return;
  }
  answerAfterRequestsThatRan(error, socket);
}

/**
 * Under pipelining (or a body sent without a length, whose bytes then read as the next request) the socket's
 * response can be an earlier, complete request's: that request ran, so its answer goes out first, and so does that
 * of each complete request queued behind it (Node gives the socket to the next one as each finishes), then this one.
 * A response already under way for the request in error cannot be followed by another one. One not yet begun (the
 * request's body was malformed or never ended while the handler read it) gives way to this answer, as Node's own
 * does; the handler's later reply then goes nowhere, since the socket is gone.
 */
function answerAfterRequestsThatRan(error: NodeJS.ErrnoException, socket: Socket) {
  if (!socket.writable) {
    socket.destroy();
    return;
  }
  const pending = (socket as Socket & { _httpMessage?: PendingResponse | null })._httpMessage;
  if (pending && !pending.writableFinished && pending.req?.complete !== false) {
    answeredAt.set(socket, socket.bytesRead); // the parser fails again on each later chunk: this is its one answer
    pending.once('finish', () => answerAfterRequestsThatRan(error, socket));
    pending.once('close', () => {
      if (!pending.writableFinished) socket.destroy();
    });
    return;
  }
  if (pending && !pending.writableFinished && pending.headersSent) {
    socket.destroy();
    return;
  }
  sendClientError(error, socket);
}

interface PendingResponse {
  headersSent: boolean;
  writableFinished: boolean;
  req?: { complete: boolean };
  once(event: 'finish' | 'close', listener: () => void): void;
}

function sendClientError(error: NodeJS.ErrnoException, socket: Socket) {
  const appError = CLIENT_ERRORS[error.code ?? ''] ?? new AppError('BAD_REQUEST', 'Malformed HTTP request', 'The request could not be parsed as HTTP/1.1');
  const status = HTTP_STATUS[appError.code];
  const body = JSON.stringify(errorBody(appError));
  const answer =
    `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json; charset=utf-8\r\n` +
    `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`;
  // With a clientError listener Node no longer destroys the socket. After a parse error (HPE_*) the parser stays in
  // its error state, so nothing more is parsed while the socket lingers until the client closes or the budget runs
  // out. After a timeout the parser would go on and run a request that arrives late: destroy once the answer is out.
  if (!error.code?.startsWith('HPE_')) {
    socket.end(answer, () => socket.destroy());
    return;
  }
  answeredAt.set(socket, socket.bytesRead);
  const timer = setTimeout(() => socket.destroy(), ANSWERED_LINGER_MS);
  timer.unref();
  socket.once('close', () => clearTimeout(timer));
  socket.once('end', () => socket.destroy());
  socket.end(answer);
}

/**
 * A body that stops arriving. Node bounds only the whole request (15 minutes, so that the largest upload can arrive
 * slowly), and within that a client can send part of a body and then nothing, holding its connection and the part
 * buffered so far. Past `idleMs` without a byte the request is answered 408 (as Node's own timeout is) and the
 * connection closed. Any byte counts, so a slow but steady upload is never cut. While the socket is paused the
 * client cannot send (nobody is reading the body yet, or a reader holds it back), so that time does not count.
 * The socket's byte count is sampled a few times per `idleMs` (one timer per body in progress) rather than followed
 * chunk by chunk, which would add work to every chunk of every body.
 */
export function limitBodyIdleTime(req: IncomingMessage, res: ServerResponse, idleMs: number): void {
  if (req.headers['transfer-encoding'] === undefined && !(Number(req.headers['content-length']) > 0)) return;
  const socket = req.socket;
  let seen = socket.bytesRead;
  let quietSince = Date.now();
  const timer = setInterval(
    () => {
      if (req.complete) return clearInterval(timer);
      if (socket.bytesRead !== seen || socket.isPaused()) {
        seen = socket.bytesRead;
        quietSince = Date.now();
      } else if (Date.now() - quietSince >= idleMs) {
        clearInterval(timer);
        answerClientError(Object.assign(new Error('request body idle'), { code: BODY_IDLE }), socket);
      }
    },
    Math.max(10, Math.floor(idleMs / 4)),
  );
  timer.unref();
  // Once answered the rest of the body is the dispatcher's bounded drain's; a closed socket needs no watch.
  res.once('close', () => clearInterval(timer));
}

/**
 * One port for both protocols: the first byte of a connection tells a TLS handshake from plain HTTP.
 * TLS goes to the HTTPS server; plain HTTP goes to a server whose handler answers with a clear error
 * (or serves, behind a trusted proxy that terminated TLS). Nobody gets a silent connection reset.
 */
export function createDualListener(
  tls: TlsMaterial,
  handle: RequestHandler,
  /** The certificate of a custom domain, by SNI; undefined (or a failure) falls back to the default one. */
  contextFor?: (servername: string) => Promise<SecureContext | undefined>,
  timeouts: ListenerTimeouts = DEFAULT_LISTENER_TIMEOUTS,
): { server: Server; closeConnections(): void } {
  const serverOptions = {
    // Node would answer a request without Host itself, with a bare 400; dispatch answers it with the envelope.
    requireHostHeader: false,
    keepAliveTimeout: timeouts.keepAliveMs,
    headersTimeout: timeouts.headersMs,
    requestTimeout: timeouts.requestMs,
    connectionsCheckingInterval: timeouts.checkIntervalMs,
  };
  const SNICallback = contextFor
    ? (servername: string, done: (error: Error | null, context?: SecureContext) => void) => {
        contextFor(servername.toLowerCase()).then(
          (context) => done(null, context),
          () => done(null, undefined),
        );
      }
    : undefined;
  const https = createHttpsServer(
    { ...serverOptions, cert: tls.cert, key: tls.key, minVersion: 'TLSv1.2', ...(SNICallback ? { SNICallback } : {}) },
    (req, res) => handle(req, res, true),
  );
  const http = createHttpServer(serverOptions, (req, res) => handle(req, res, false));
  // node:http enforces headersTimeout and requestTimeout from a periodic check it starts when its server emits
  // 'listening'. These two never listen (they are handed sockets), so without this a client that sends half a
  // request would hold its connection for ever (slowloris). The listener test holds every Node we run to it.
  https.emit('listening');
  http.emit('listening');
  const sockets = new Set<Socket>();
  // TLS connections whose handshake has not ended, by both ends' address and port (unique among open connections),
  // with their deadline: the https server's own handshakeTimeout never fires on a socket handed to it this way.
  const handshakes = new Map<string, NodeJS.Timeout>();
  const remoteOf = (socket: Socket) => `${socket.remoteAddress}|${socket.remotePort}|${socket.localAddress}|${socket.localPort}`;
  https.on('secureConnection', (secured: Socket) => {
    const key = remoteOf(secured);
    clearTimeout(handshakes.get(key));
    handshakes.delete(key);
  });

  // TCP_NODELAY, as node:http sets on the sockets it accepts itself: with Nagle's algorithm a response written in
  // several pieces (TLS records of a large body) waits for the client's delayed ACK, up to 40 ms.
  const server = createNetServer({ noDelay: true }, (socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
    // `on`, not `once`: a socket can report more than one error (a reset during a TLS write, then the close).
    socket.on('error', () => socket.destroy());
    // A connection that never sends a byte would otherwise be held for ever (the HTTP timeouts start later).
    socket.setTimeout(timeouts.firstByteMs, () => socket.destroy());
    socket.once('data', (first: Buffer) => {
      socket.setTimeout(0);
      socket.pause();
      socket.unshift(first);
      if (first[0] === TLS_HANDSHAKE) {
        const key = remoteOf(socket);
        const deadline = setTimeout(() => socket.destroy(), timeouts.handshakeMs);
        handshakes.set(key, deadline);
        socket.once('close', () => {
          clearTimeout(deadline);
          if (handshakes.get(key) === deadline) handshakes.delete(key);
        });
        https.emit('connection', socket);
      } else {
        http.emit('connection', socket);
      }
      process.nextTick(() => socket.resume());
    });
  });
  https.on('clientError', answerClientError);
  http.on('clientError', answerClientError);
  server.on('close', () => {
    https.close();
    http.close();
  });
  return {
    server,
    closeConnections() {
      https.closeIdleConnections();
      http.closeIdleConnections();
      for (const socket of sockets) socket.destroy();
    },
  };
}
