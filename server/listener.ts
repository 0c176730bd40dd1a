import { createServer as createHttpServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { createServer as createNetServer, type Server, type Socket } from 'node:net';
import type { TlsMaterial } from './tls.ts';

export type RequestHandler = (req: IncomingMessage, res: ServerResponse, secure: boolean) => void;

const TLS_HANDSHAKE = 0x16;
const FIRST_BYTE_TIMEOUT_MS = 10_000;

/**
 * One port for both protocols: the first byte of a connection tells a TLS handshake from plain HTTP.
 * TLS goes to the HTTPS server; plain HTTP goes to a server whose handler answers with a clear error
 * (or serves, behind a trusted proxy that terminated TLS). Nobody gets a silent connection reset.
 */
export function createDualListener(tls: TlsMaterial, handle: RequestHandler): { server: Server; closeConnections(): void } {
  const serverOptions = { keepAliveTimeout: 5_000, headersTimeout: 20_000, requestTimeout: 120_000 };
  const https = createHttpsServer({ ...serverOptions, cert: tls.cert, key: tls.key, minVersion: 'TLSv1.2' }, (req, res) => handle(req, res, true));
  const http = createHttpServer(serverOptions, (req, res) => handle(req, res, false));
  const sockets = new Set<Socket>();

  // TCP_NODELAY, as node:http sets on the sockets it accepts itself: with Nagle's algorithm a response written in
  // several pieces (TLS records of a large body) waits for the client's delayed ACK, up to 40 ms.
  const server = createNetServer({ noDelay: true }, (socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
    socket.once('error', () => socket.destroy());
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
