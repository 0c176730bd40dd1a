import { createServer, type Server, type ServerResponse } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { closeWhenStalled } from './stalled-reader.ts';

let server: Server | undefined;
const sockets: Socket[] = [];
afterEach(async () => {
  for (const socket of sockets.splice(0)) socket.destroy();
  await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  server = undefined;
});

/** A server whose one answer writes `chunks` of 64 KiB while the socket takes them, under the watch; resolves with the response once it closes. */
async function serve(chunks: number, ms: number) {
  let closed!: (res: ServerResponse) => void;
  const done = new Promise<ServerResponse>((resolve) => (closed = resolve));
  server = createServer(async (_req, res) => {
    closeWhenStalled(res, ms);
    res.once('close', () => closed(res));
    res.writeHead(200, { 'content-type': 'application/jsonl' });
    for (let i = 0; i < chunks && !res.destroyed; i++) {
      if (!res.write(`${'x'.repeat(65_535)}\n`)) await new Promise((resolve) => res.once('drain', resolve).once('close', resolve));
    }
    if (!res.destroyed) res.end();
  });
  await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
  return { port: (server!.address() as AddressInfo).port, done };
}

function request(port: number, read: boolean) {
  const socket = connect(port, '127.0.0.1');
  sockets.push(socket);
  socket.write('GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
  let received = 0;
  if (read) socket.on('data', (chunk: Buffer) => (received += chunk.length));
  else socket.pause();
  socket.on('error', () => {});
  return { socket, received: () => received };
}

describe('closeWhenStalled', () => {
  it('closes an answer whose reader stopped taking it', async () => {
    const { port, done } = await serve(1_000, 200);
    request(port, false);
    const res = await done;
    expect(res.writableFinished).toBe(false);
    expect(res.destroyed).toBe(true);
  });

  it('leaves a reader that keeps reading alone, however long the answer', async () => {
    const { port, done } = await serve(200, 1_000);
    const client = request(port, true);
    const res = await done;
    expect(res.writableFinished).toBe(true);
    await new Promise((resolve) => client.socket.once('end', resolve));
    expect(client.received()).toBeGreaterThan(200 * 65_536);
  });
});
