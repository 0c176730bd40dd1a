import { mkdtempSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { connect as connectTcp, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect as connectTls } from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDualListener, type ListenerTimeouts } from './listener.ts';
import { loadTlsMaterial } from './tls.ts';

// Short limits, so that each case takes well under a second; the defaults differ only in their values.
const TIMEOUTS: ListenerTimeouts = { firstByteMs: 400, handshakeMs: 2_000, headersMs: 400, requestMs: 800, checkIntervalMs: 100, keepAliveMs: 5_000 };
/** A connection must be answered or closed by then (the limit, the check interval and slack for a busy machine). */
const CLOSED_WITHIN_MS = 5_000;

let dataDir: string;
let port: number;
let close: () => Promise<void>;

beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), 'listener-test-'));
  const tls = await loadTlsMaterial({ dataDir });
  const listener = createDualListener(
    tls,
    (req, res) => {
      // Reads the whole body, as the real handlers do, then answers.
      req.resume();
      req.on('end', () => (req.url === '/slow' ? setTimeout(() => res.end('ok'), 300) : res.end('ok')));
    },
    undefined,
    TIMEOUTS,
  );
  await new Promise<void>((resolve) => listener.server.listen(0, '127.0.0.1', resolve));
  port = (listener.server.address() as AddressInfo).port;
  close = () =>
    new Promise<void>((resolve) => {
      listener.server.close(() => resolve());
      listener.closeConnections();
    });
});

afterAll(async () => {
  await close();
  rmSync(dataDir, { recursive: true, force: true });
});

interface Outcome {
  received: string;
  closedAfterMs: number;
}

/** Opens a connection, sends `data` once connected (over TLS when `secure`), and resolves when the server closes it. */
function send(data: string | Buffer, secure: boolean): Promise<Outcome> {
  return new Promise((resolve, reject) => {
    const started = Date.now();
    let received = '';
    const socket: Socket = secure
      ? connectTls({ port, host: '127.0.0.1', rejectUnauthorized: false }, () => socket.write(data))
      : connectTcp({ port, host: '127.0.0.1' }, () => socket.write(data));
    const guard = setTimeout(() => {
      socket.destroy();
      reject(new Error(`still open after ${CLOSED_WITHIN_MS} ms; received ${JSON.stringify(received)}`));
    }, CLOSED_WITHIN_MS);
    socket.on('data', (chunk) => {
      received += chunk.toString();
    });
    socket.on('error', () => {});
    socket.on('close', () => {
      clearTimeout(guard);
      resolve({ received, closedAfterMs: Date.now() - started });
    });
  });
}

function expectRequestTimeout(outcome: Outcome) {
  expect(outcome.received).toMatch(/^HTTP\/1\.1 408 /);
  const body = JSON.parse(outcome.received.slice(outcome.received.indexOf('\r\n\r\n') + 4));
  expect(body).toMatchObject({ success: false, error: { code: 'REQUEST_TIMEOUT' } });
}

describe('the listener bounds how long a connection may take (slowloris)', () => {
  it('answers 408 with the envelope when the headers over TLS never end', async () => {
    const outcome = await send('GET /api/v1/health/hosting HTTP/1.1\r\nHost: x\r\nX-Slow: a', true);
    expectRequestTimeout(outcome);
    expect(outcome.closedAfterMs).toBeGreaterThanOrEqual(TIMEOUTS.headersMs - 50);
  });

  it('answers 408 when a TLS connection sends no request after its handshake', async () => {
    expectRequestTimeout(await send('', true));
  });

  it('answers 408 when plain HTTP headers never end', async () => {
    expectRequestTimeout(await send('GET / HTTP/1.1\r\nHost: x\r\n', false));
  });

  it('answers 408 when the body never ends', async () => {
    const outcome = await send('POST /api/v1/auth/sign-in HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"email":', true);
    expectRequestTimeout(outcome);
    expect(outcome.closedAfterMs).toBeGreaterThanOrEqual(TIMEOUTS.requestMs - 50);
  });

  it('answers 400 with the envelope when a chunked body is malformed, even though the handler was reading it', async () => {
    const outcome = await send('POST /x HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nZZZ\r\nabc\r\n', true);
    expect(outcome.received).toMatch(/^HTTP\/1\.1 400 /);
    const body = JSON.parse(outcome.received.slice(outcome.received.indexOf('\r\n\r\n') + 4));
    expect(body).toMatchObject({ success: false, error: { code: 'BAD_REQUEST' } });
  });

  it('never answers a pipelined malformed request as if it were the complete request before it', async () => {
    const outcome = await send('GET /slow HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n', true);
    expect(outcome.received).not.toMatch(/^HTTP\/1\.1 400 /);
  });

  it('answers every complete pipelined request before the 400 of the bytes after them, in order', async () => {
    for (const secure of [true, false]) {
      const outcome = await send('GET / HTTP/1.1\r\nHost: x\r\n\r\nGET /slow HTTP/1.1\r\nHost: x\r\n\r\nGARBAGE\r\n\r\n', secure);
      expect(outcome.received.match(/HTTP\/1\.1 \d{3}/g), outcome.received).toEqual(['HTTP/1.1 200', 'HTTP/1.1 200', 'HTTP/1.1 400']);
      const error = outcome.received.slice(outcome.received.lastIndexOf('HTTP/1.1 400'));
      expect(JSON.parse(error.slice(error.indexOf('\r\n\r\n') + 4))).toMatchObject({ success: false, error: { code: 'BAD_REQUEST' } });
    }
  });

  it('closes a TLS handshake that never ends', async () => {
    const outcome = await send(Buffer.from([0x16]), false);
    expect(outcome.received).toBe('');
    expect(outcome.closedAfterMs).toBeGreaterThanOrEqual(TIMEOUTS.handshakeMs - 50);
  });

  it('closes a connection that sends nothing', async () => {
    const outcome = await send('', false);
    expect(outcome.received).toBe('');
    expect(outcome.closedAfterMs).toBeGreaterThanOrEqual(TIMEOUTS.firstByteMs - 50);
  });

  it('keeps a TLS connection whose handshake ended past the handshake deadline (keep-alive)', async () => {
    const socket = connectTls({ port, host: '127.0.0.1', rejectUnauthorized: false });
    socket.on('error', () => {});
    const answers: string[] = [];
    socket.on('data', (chunk) => answers.push(chunk.toString()));
    await new Promise((resolve) => socket.once('secureConnect', resolve));
    const ask = async () => {
      const before = answers.length;
      socket.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n');
      const deadline = Date.now() + CLOSED_WITHIN_MS;
      while (answers.length === before && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
      return answers.slice(before).join('');
    };
    expect(await ask()).toMatch(/^HTTP\/1\.1 200 .*ok$/s);
    await new Promise((resolve) => setTimeout(resolve, TIMEOUTS.handshakeMs + 300));
    expect(socket.destroyed).toBe(false);
    expect(await ask()).toMatch(/^HTTP\/1\.1 200 .*ok$/s);
    socket.destroy();
  });
});
