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
const FIRST_BYTE_TIMEOUT_MS = 10_000;

const CLIENT_ERRORS: Record<string, AppError> = {
  HPE_HEADER_OVERFLOW: new AppError('HEADERS_TOO_LARGE', 'Request headers too large', 'Headers are limited to 16 KiB'),
  ERR_HTTP_REQUEST_TIMEOUT: new AppError('REQUEST_TIMEOUT', 'Request timeout', 'The request was not received in time'),
};

/**
 * A request Node's parser refuses (a malformed request line, an invalid header character such as NUL, headers
 * too large, a timeout) never reaches our dispatch: answer it with the same error envelope instead of Node's
 * bare `400 Bad Request`, then close, since the rest of the stream cannot be trusted.
 */
function answerClientError(error: NodeJS.ErrnoException, socket: Socket) {
  // A response already under way on this socket cannot be followed by another one.
  if (!socket.writable || (socket as Socket & { _httpMessage?: unknown })._httpMessage) {
    socket.destroy();
    return;
  }
  const appError = CLIENT_ERRORS[error.code ?? ''] ?? new AppError('BAD_REQUEST', 'Malformed HTTP request', 'The request could not be parsed as HTTP/1.1');
  const status = HTTP_STATUS[appError.code];
  const body = JSON.stringify(errorBody(appError));
  // With a clientError listener Node no longer destroys the socket: a half-closed one would be kept, and a client
  // that went on sending could still have a request parsed. Destroy it once the answer is flushed.
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json; charset=utf-8\r\n` +
      `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    () => socket.destroy(),
  );
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
): { server: Server; closeConnections(): void } {
  const serverOptions = { keepAliveTimeout: 5_000, headersTimeout: 20_000, requestTimeout: 120_000 };
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
  const sockets = new Set<Socket>();

  // TCP_NODELAY, as node:http sets on the sockets it accepts itself: with Nagle's algorithm a response written in
  // several pieces (TLS records of a large body) waits for the client's delayed ACK, up to 40 ms.
  const server = createNetServer({ noDelay: true }, (socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
    // `on`, not `once`: a socket can report more than one error (a reset during a TLS write, then the close).
    socket.on('error', () => socket.destroy());
    // A connection that never sends a byte would otherwise be held for ever (the HTTP timeouts start later).
    socket.setTimeout(FIRST_BYTE_TIMEOUT_MS, () => socket.destroy());
    socket.once('data', (first: Buffer) => {
      socket.setTimeout(0);
      socket.pause();
      socket.unshift(first);
      (first[0] === TLS_HANDSHAKE ? https : http).emit('connection', socket);
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
