import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Readable } from 'node:stream';
import zlib from 'node:zlib';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { createGuardedHttpClient } from './guarded-client.ts';
import { OutboundError, type OutboundErrorKind } from './outbound-error.ts';
import { createPinnedLookup } from './pinned-agents.ts';

// DNS is faked so no test ever queries a real resolver. Only 'localhost'
// falls through to the system lookup (answered from /etc/hosts).
const fakeDns = vi.hoisted(() => new Map<string, Array<{ address: string; family: number }> | string>());
const lookupCalls = vi.hoisted(() => ({ hosts: [] as string[] }));

vi.mock('node:dns/promises', async (importOriginal) => {
  const actual = await importOriginal<typeof import('node:dns/promises')>();
  const lookup = async (host: string, options: { all: true; verbatim?: boolean }) => {
    lookupCalls.hosts.push(host);
    const fake = fakeDns.get(host);
    if (typeof fake === 'string') throw Object.assign(new Error(`getaddrinfo ${fake} ${host}`), { code: fake });
    if (fake !== undefined) return fake;
    if (host === 'localhost') return actual.lookup(host, options);
    throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' });
  };
  return { ...actual, lookup, default: { ...actual, lookup } };
});

interface TestServer {
  server: http.Server;
  port: number;
  hits: string[];
}

async function startServer(host: string, handler: http.RequestListener): Promise<TestServer> {
  const hits: string[] = [];
  const server = http.createServer((req, res) => {
    hits.push(req.url ?? '');
    handler(req, res);
  });
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  return { server, port: (server.address() as AddressInfo).port, hits };
}

async function stopServer(s: TestServer): Promise<void> {
  s.server.closeAllConnections();
  await new Promise<void>((resolve) => s.server.close(() => resolve()));
}

async function compressZeros(create: () => zlib.Gzip | zlib.DeflateRaw, mebibytes: number): Promise<Buffer> {
  const encoder = create();
  const chunks: Buffer[] = [];
  encoder.on('data', (chunk: Buffer) => chunks.push(chunk));
  const done = new Promise<void>((resolve, reject) => {
    encoder.on('end', resolve);
    encoder.on('error', reject);
  });
  const zero = Buffer.alloc(1024 * 1024);
  for (let i = 0; i < mebibytes; i += 1) {
    if (!encoder.write(zero)) await new Promise((resolve) => encoder.once('drain', resolve));
  }
  encoder.end();
  await done;
  return Buffer.concat(chunks);
}

async function expectOutbound(promise: Promise<unknown>, kind: OutboundErrorKind): Promise<OutboundError> {
  const err = await promise.then(
    () => {
      throw new Error(`expected OutboundError(${kind}) but the call succeeded`);
    },
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(OutboundError);
  expect((err as OutboundError).kind, (err as Error).message).toBe(kind);
  expect((err as Error).message).not.toMatch(/\n\s+at /);
  return err as OutboundError;
}

const TWO_MB = 2 * 1024 * 1024;
const ONE_MB = 1024 * 1024;
const BOMB_MIB = 128;

let main: TestServer;
let target: TestServer;
let other: TestServer;
let gzipBomb: Buffer;
let deflateBomb: Buffer;
const openResponses = new Set<http.ServerResponse>();
let lastClosedBeforeEnd = false;

beforeAll(async () => {
  gzipBomb = await compressZeros(() => zlib.createGzip(), BOMB_MIB);
  deflateBomb = await compressZeros(() => zlib.createDeflateRaw(), BOMB_MIB);
  target = await startServer('127.0.0.1', (_req, res) => res.end('target reached'));
  other = await startServer('127.0.0.2', (_req, res) => res.end('pinned server'));
  main = await startServer('127.0.0.1', (req, res) => {
    const path = req.url ?? '/';
    const body: Buffer[] = [];
    req.on('data', (c: Buffer) => body.push(c));
    req.on('end', () => {
      switch (path) {
        case '/ok':
          res.end('hello');
          return;
        case '/echo':
          res.setHeader('content-type', 'application/json');
          res.end(JSON.stringify({ method: req.method, headers: req.headers, body: Buffer.concat(body).toString('utf8') }));
          return;
        case '/json':
          res.setHeader('content-type', 'application/json');
          res.end('{"ok":true,"n":[1,2]}');
          return;
        case '/badjson':
          res.end('<html>internal error page</html>');
          return;
        case '/redirect':
          res.writeHead(302, { location: `http://127.0.0.1:${target.port}/secret` });
          res.end();
          return;
        case '/hang':
        case '/slow-body':
          openResponses.add(res);
          if (path === '/slow-body') {
            res.writeHead(200, { 'content-type': 'text/plain' });
            res.write('partial');
          }
          return;
        case '/big':
          res.writeHead(200, { 'content-length': String(TWO_MB) });
          res.end(Buffer.alloc(TWO_MB, 0x61));
          return;
        case '/big-chunked':
          for (let i = 0; i < 32; i += 1) res.write(Buffer.alloc(TWO_MB / 32, 0x61));
          res.end();
          return;
        case '/head-big':
          res.writeHead(200, { 'content-length': String(10 * TWO_MB), 'content-encoding': 'gzip' });
          res.end();
          return;
        case '/gzip-json':
          res.writeHead(200, { 'content-type': 'application/json', 'content-encoding': 'gzip' });
          res.end(zlib.gzipSync('{"compressed":"gzip"}'));
          return;
        case '/br':
          res.writeHead(200, { 'content-encoding': 'br' });
          res.end(zlib.brotliCompressSync('brotli body'));
          return;
        case '/deflate':
          res.writeHead(200, { 'content-encoding': 'deflate' });
          res.end(zlib.deflateSync('zlib deflate body'));
          return;
        case '/deflate-raw':
          res.writeHead(200, { 'content-encoding': 'deflate' });
          res.end(zlib.deflateRawSync('raw deflate body'));
          return;
        case '/gzip-bomb':
          res.writeHead(200, { 'content-encoding': 'gzip', 'content-length': String(gzipBomb.length) });
          res.end(gzipBomb);
          return;
        case '/deflate-bomb':
          res.writeHead(200, { 'content-encoding': 'deflate' });
          res.end(deflateBomb);
          return;
        case '/corrupt-gzip':
          res.writeHead(200, { 'content-encoding': 'gzip' });
          res.end(Buffer.from('this is not gzip at all'));
          return;
        case '/sse': {
          res.writeHead(200, { 'content-type': 'text/event-stream', 'content-encoding': 'gzip' });
          const gz = zlib.createGzip({ flush: zlib.constants.Z_SYNC_FLUSH });
          gz.pipe(res);
          let n = 0;
          const tick = setInterval(() => {
            n += 1;
            gz.write(`data: ${n}\n\n`);
            if (n === 3) {
              clearInterval(tick);
              gz.end();
            }
          }, 20);
          return;
        }
        case '/endless': {
          lastClosedBeforeEnd = false;
          res.writeHead(200, { 'content-type': 'text/event-stream' });
          const tick = setInterval(() => res.write('data: tick\n\n'), 10);
          res.on('close', () => {
            clearInterval(tick);
            lastClosedBeforeEnd = !res.writableFinished;
          });
          return;
        }
        default:
          res.statusCode = 404;
          res.end('not found');
      }
    });
  });
});

afterEach(() => {
  fakeDns.clear();
  lookupCalls.hosts.length = 0;
});

afterAll(async () => {
  for (const res of openResponses) res.destroy();
  await Promise.all([main, target, other].filter(Boolean).map(stopServer));
});

const allowMain = () => createGuardedHttpClient({ allowHosts: [`127.0.0.1:${main.port}`] });

describe('address guard', () => {
  it.each([
    (p: number) => `http://127.0.0.1:${p}/ok`,
    (p: number) => `http://127.1:${p}/ok`,
    (p: number) => `http://2130706433:${p}/ok`,
    (p: number) => `http://0x7f000001:${p}/ok`,
    (p: number) => `http://0177.0.0.1:${p}/ok`,
    (p: number) => `http://[::ffff:127.0.0.1]:${p}/ok`,
    (p: number) => `http://[::1]:${p}/ok`,
    (p: number) => `http://localhost:${p}/ok`,
    (p: number) => `http://LocalHost:${p}/ok`,
  ])('refuses the loopback spelling %#', async (build) => {
    const client = createGuardedHttpClient({ allowHosts: [] });
    await expectOutbound(client.request(build(main.port)), 'blocked_address');
    expect(main.hits).toEqual([]);
  });

  it('allow-list is per host:port', async () => {
    const client = createGuardedHttpClient({ allowHosts: [`127.0.0.1:${target.port}`] });
    await expectOutbound(client.request(`http://127.0.0.1:${main.port}/ok`), 'blocked_address');
    expect(main.hits).toEqual([]);
  });

  it('succeeds when host:port is allow-listed', async () => {
    const res = await allowMain().request(`http://127.0.0.1:${main.port}/ok`);
    expect(res.status).toBe(200);
    expect(res.text()).toBe('hello');
    expect(res.url).toBe(`http://127.0.0.1:${main.port}/ok`);
    main.hits.length = 0;
  });

  it('allow-list matches bracketed IPv6 entries and other spellings of the same literal', async () => {
    const client = createGuardedHttpClient({ allowHosts: [`[::FFFF:127.0.0.1]:${main.port}`] });
    const res = await client.request(`http://[::ffff:7f00:1]:${main.port}/ok`);
    expect(res.text()).toBe('hello');
    main.hits.length = 0;
  });

  it('rejects malformed allow-list entries', () => {
    expect(() => createGuardedHttpClient({ allowHosts: ['localhost'] })).toThrow(/host:port/);
    expect(() => createGuardedHttpClient({ allowHosts: ['localhost:99999'] })).toThrow(/host:port/);
  });

  it('refuses a hostname when ANY resolved address is non-public', async () => {
    fakeDns.set('mixed.test', [
      { address: '93.184.216.34', family: 4 },
      { address: '10.0.0.1', family: 4 },
    ]);
    const client = createGuardedHttpClient({ allowHosts: [] });
    const err = await expectOutbound(client.request('http://mixed.test/'), 'blocked_address');
    expect(err.message).not.toContain('10.0.0.1');
    fakeDns.set('v6.test', [{ address: 'fd00:ec2::254', family: 6 }]);
    await expectOutbound(client.assertAllowed('http://v6.test/'), 'blocked_address');
  });

  it('maps NXDOMAIN to dns_failure', async () => {
    fakeDns.set('nx.test', 'ENOTFOUND');
    const client = createGuardedHttpClient({ allowHosts: [] });
    await expectOutbound(client.request('https://nx.test/'), 'dns_failure');
  });

  it('connects to the address that was checked, never re-resolving (DNS pinning)', async () => {
    // The checked answer is 127.0.0.2, where only `other` listens; a second,
    // system resolution of 'localhost' would give 127.0.0.1 and fail.
    fakeDns.set('localhost', [{ address: '127.0.0.2', family: 4 }]);
    const client = createGuardedHttpClient({ allowHosts: [`localhost:${other.port}`] });
    const res = await client.request(`http://localhost:${other.port}/x`);
    expect(res.text()).toBe('pinned server');
    expect(lookupCalls.hosts).toEqual(['localhost']);
  });

  it('createPinnedLookup always answers with the pinned address', async () => {
    const lookup = createPinnedLookup('93.184.216.34', 4);
    const one = await new Promise<unknown[]>((resolve) => lookup('evil.example', { family: 6 }, (...args) => resolve(args)));
    expect(one).toEqual([null, '93.184.216.34', 4]);
    const all = await new Promise<unknown[]>((resolve) => lookup('other.example', { all: true }, (...args) => resolve(args)));
    expect(all).toEqual([null, [{ address: '93.184.216.34', family: 4 }]]);
    const v6 = createPinnedLookup('2606:4700:4700::1111', 6);
    const six = await new Promise<unknown[]>((resolve) => v6('x', {}, (...args) => resolve(args)));
    expect(six).toEqual([null, '2606:4700:4700::1111', 6]);
  });
});

describe('assertAllowed', () => {
  const client = createGuardedHttpClient({ allowHosts: [] });

  it.each([
    ['ftp://x', 'invalid_url'],
    ['file:///etc/passwd', 'invalid_url'],
    ['not a url', 'invalid_url'],
    ['http://user:pass@example.com', 'invalid_url'],
    ['http://user@example.com', 'invalid_url'],
    ['http://169.254.169.254/', 'blocked_address'],
    ['http://[::1]/', 'blocked_address'],
    ['http://[fd00:ec2::254]/', 'blocked_address'],
    ['http://0/', 'blocked_address'],
    ['https://localhost/', 'blocked_address'],
  ] as const)('refuses %s (%s)', async (url, kind) => {
    await expectOutbound(client.assertAllowed(url), kind);
  });

  it('accepts a public host (faked DNS) and a public literal without connecting', async () => {
    fakeDns.set('public.test', [{ address: '93.184.216.34', family: 4 }]);
    await expect(client.assertAllowed('https://public.test/hook?token=x')).resolves.toBeUndefined();
    await expect(client.assertAllowed('https://8.8.8.8/')).resolves.toBeUndefined();
  });
});

describe('request behaviour', () => {
  it('does not follow redirects', async () => {
    const res = await allowMain().request(`http://127.0.0.1:${main.port}/redirect`);
    expect(res.status).toBe(302);
    expect(res.headers['location']).toBe(`http://127.0.0.1:${target.port}/secret`);
    expect(target.hits).toEqual([]);
  });

  it('sends method, body and client-owned headers; the caller cannot override Host', async () => {
    const res = await allowMain().request(`http://127.0.0.1:${main.port}/echo`, {
      method: 'post',
      headers: { Host: 'internal.example', 'X-Test': '1', 'Accept-Encoding': 'identity' },
      body: new TextEncoder().encode('payload'),
    });
    const echoed = res.json() as { method: string; headers: Record<string, string>; body: string };
    expect(echoed.method).toBe('POST');
    expect(echoed.body).toBe('payload');
    expect(echoed.headers['host']).toBe(`127.0.0.1:${main.port}`);
    expect(echoed.headers['accept-encoding']).toBe('gzip, deflate, br');
    expect(echoed.headers['x-test']).toBe('1');
    expect(echoed.headers['user-agent']).toBeTruthy();
  });

  it('HEAD responses are not measured or decoded against their declared length', async () => {
    const client = createGuardedHttpClient({ allowHosts: [`127.0.0.1:${main.port}`], maxResponseBytes: ONE_MB });
    const res = await client.request(`http://127.0.0.1:${main.port}/head-big`, { method: 'HEAD' });
    expect(res.status).toBe(200);
    expect(res.body.length).toBe(0);
  });

  it('surfaces an invalid header value as a programming error before sending', async () => {
    const err = await allowMain()
      .request(`http://127.0.0.1:${main.port}/echo`, { headers: { 'x-bad': 'a\r\nInjected: 1' } })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TypeError);
    expect(err).not.toBeInstanceOf(OutboundError);
  });

  it('json() parses, and throws on bad JSON without echoing the body', async () => {
    const client = allowMain();
    expect((await client.request(`http://127.0.0.1:${main.port}/json`)).json()).toEqual({ ok: true, n: [1, 2] });
    const bad = await client.request(`http://127.0.0.1:${main.port}/badjson`);
    expect(() => bad.json()).toThrow(SyntaxError);
    expect(() => bad.json()).not.toThrow(/internal error page/);
  });

  it.each([
    ['/gzip-json', '{"compressed":"gzip"}'],
    ['/br', 'brotli body'],
    ['/deflate', 'zlib deflate body'],
    ['/deflate-raw', 'raw deflate body'],
  ])('decodes %s and drops the encoding headers', async (path, expected) => {
    const res = await allowMain().request(`http://127.0.0.1:${main.port}${path}`);
    expect(res.text()).toBe(expected);
    expect(res.headers['content-encoding']).toBeUndefined();
  });

  it('maps an undecodable body to connection_failed', async () => {
    await expectOutbound(allowMain().request(`http://127.0.0.1:${main.port}/corrupt-gzip`), 'connection_failed');
  });

  it('times out a server that never answers', async () => {
    const started = Date.now();
    await expectOutbound(allowMain().request(`http://127.0.0.1:${main.port}/hang`, { timeoutMs: 300 }), 'timeout');
    expect(Date.now() - started).toBeLessThan(2000);
  });

  it('the deadline covers the body too', async () => {
    const started = Date.now();
    await expectOutbound(allowMain().request(`http://127.0.0.1:${main.port}/slow-body`, { timeoutMs: 300 }), 'timeout');
    expect(Date.now() - started).toBeLessThan(2000);
  });

  it('respects defaultTimeoutMs', async () => {
    const client = createGuardedHttpClient({ allowHosts: [`127.0.0.1:${main.port}`], defaultTimeoutMs: 200 });
    await expectOutbound(client.request(`http://127.0.0.1:${main.port}/hang`), 'timeout');
  });

  it('aborts on an external AbortSignal', async () => {
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 100);
    const started = Date.now();
    await expectOutbound(allowMain().request(`http://127.0.0.1:${main.port}/hang`, { signal: controller.signal }), 'aborted');
    expect(Date.now() - started).toBeLessThan(2000);
    await expectOutbound(allowMain().request(`http://127.0.0.1:${main.port}/ok`, { signal: AbortSignal.abort() }), 'aborted');
  });

  it.each(['/big', '/big-chunked'])('caps the response size (%s, 2 MB with a 1 MB cap)', async (path) => {
    const client = createGuardedHttpClient({ allowHosts: [`127.0.0.1:${main.port}`], maxResponseBytes: ONE_MB });
    await expectOutbound(client.request(`http://127.0.0.1:${main.port}${path}`), 'response_too_large');
    const perRequest = allowMain().request(`http://127.0.0.1:${main.port}${path}`, { maxResponseBytes: ONE_MB });
    await expectOutbound(perRequest, 'response_too_large');
    const fits = await allowMain().request(`http://127.0.0.1:${main.port}${path}`);
    expect(fits.body.length).toBe(TWO_MB);
  });

  it.each(['/gzip-bomb', '/deflate-bomb'])('stops a compression bomb (%s, 128 MiB of zeros) fast and with little memory', async (path) => {
    const baseline = process.memoryUsage.rss();
    let peak = baseline;
    const sampler = setInterval(() => {
      peak = Math.max(peak, process.memoryUsage.rss());
    }, 2);
    const started = Date.now();
    try {
      await expectOutbound(allowMain().request(`http://127.0.0.1:${main.port}${path}`, { maxResponseBytes: ONE_MB }), 'response_too_large');
    } finally {
      clearInterval(sampler);
    }
    peak = Math.max(peak, process.memoryUsage.rss());
    expect(Date.now() - started).toBeLessThan(2000);
    expect(peak - baseline).toBeLessThan(64 * 1024 * 1024);
  });

  it('maps a refused connection to connection_failed', async () => {
    const closed = await startServer('127.0.0.1', (_req, res) => res.end());
    await stopServer(closed);
    const client = createGuardedHttpClient({ allowHosts: [`127.0.0.1:${closed.port}`] });
    const err = await expectOutbound(client.request(`http://127.0.0.1:${closed.port}/`), 'connection_failed');
    expect(err.message).toContain('ECONNREFUSED');
  });

  it('maps a TLS handshake failure to tls_error', async () => {
    await expectOutbound(allowMain().request(`https://127.0.0.1:${main.port}/ok`), 'tls_error');
  });

  it('keeps the URL path and query out of error messages', async () => {
    const err = await expectOutbound(createGuardedHttpClient({ allowHosts: [] }).request('http://10.0.0.1/hooks/SECRET?token=SECRET'), 'blocked_address');
    expect(err.message).not.toContain('SECRET');
  });
});

describe('stream', () => {
  async function readAll(body: Readable): Promise<string> {
    const chunks: Buffer[] = [];
    for await (const chunk of body) chunks.push(chunk as Buffer);
    return Buffer.concat(chunks).toString('utf8');
  }

  it('streams a decompressed SSE body', async () => {
    const res = await allowMain().stream(`http://127.0.0.1:${main.port}/sse`);
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toBe('text/event-stream');
    expect(res.headers['content-encoding']).toBeUndefined();
    expect(await readAll(res.body)).toBe('data: 1\n\ndata: 2\n\ndata: 3\n\n');
  });

  it('applies the guard before connecting', async () => {
    await expectOutbound(createGuardedHttpClient({ allowHosts: [] }).stream(`http://127.1:${main.port}/sse`), 'blocked_address');
  });

  it('caps the streamed size', async () => {
    const res = await allowMain().stream(`http://127.0.0.1:${main.port}/big-chunked`, { maxResponseBytes: ONE_MB });
    await expectOutbound(readAll(res.body), 'response_too_large');
  });

  it('closes the upstream connection when the consumer destroys the body', async () => {
    const res = await allowMain().stream(`http://127.0.0.1:${main.port}/endless`);
    await new Promise((resolve) => res.body.once('data', resolve));
    res.body.destroy();
    await vi.waitFor(() => expect(lastClosedBeforeEnd).toBe(true), { timeout: 2000 });
  });

  it('the deadline also ends a stream', async () => {
    const res = await allowMain().stream(`http://127.0.0.1:${main.port}/endless`, { timeoutMs: 300 });
    await expectOutbound(readAll(res.body), 'timeout');
  });
});

describe('connection reuse', () => {
  interface CountingServer extends TestServer {
    connections: () => number;
    openSockets: () => number;
  }

  async function startCounting(host: string, port = 0): Promise<CountingServer> {
    const hits: string[] = [];
    const server = http.createServer((req, res) => {
      hits.push(req.url ?? '');
      if (req.url === '/big') {
        res.writeHead(200, { 'content-length': String(TWO_MB) });
        res.end(Buffer.alloc(TWO_MB, 0x61));
      } else if (req.url === '/big-chunked') {
        for (let i = 0; i < 32; i += 1) res.write(Buffer.alloc(TWO_MB / 32, 0x61));
        res.end();
      } else if (req.url === '/redirect') {
        res.writeHead(302, { location: 'http://127.0.0.1/elsewhere' });
        res.end('moved');
      } else if (req.url === '/hang') {
        res.writeHead(200);
        res.write('partial');
      } else {
        res.end(`${host} ok`);
      }
    });
    let connections = 0;
    const sockets = new Set<import('node:net').Socket>();
    server.on('connection', (socket) => {
      connections += 1;
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, resolve);
    });
    return {
      server,
      port: (server.address() as AddressInfo).port,
      hits,
      connections: () => connections,
      openSockets: () => sockets.size,
    };
  }

  const servers: TestServer[] = [];
  afterEach(async () => {
    await Promise.all(servers.splice(0).map(stopServer));
  });
  async function counting(host: string, port?: number): Promise<CountingServer> {
    const s = await startCounting(host, port);
    servers.push(s);
    return s;
  }

  it('reuses one connection for sequential requests to the same checked target', async () => {
    const s = await counting('127.0.0.1');
    const client = createGuardedHttpClient({ allowHosts: [`127.0.0.1:${s.port}`] });
    const first = await client.request(`http://127.0.0.1:${s.port}/a`);
    const second = await client.request(`http://127.0.0.1:${s.port}/b`);
    expect([first.text(), second.text()]).toEqual(['127.0.0.1 ok', '127.0.0.1 ok']);
    expect(s.hits).toEqual(['/a', '/b']);
    expect(s.connections()).toBe(1);
  });

  it('reuses the connection after a redirect response, which is returned as-is', async () => {
    const s = await counting('127.0.0.1');
    const client = createGuardedHttpClient({ allowHosts: [`127.0.0.1:${s.port}`] });
    const moved = await client.request(`http://127.0.0.1:${s.port}/redirect`);
    expect(moved.status).toBe(302);
    expect(moved.text()).toBe('moved');
    expect((await client.request(`http://127.0.0.1:${s.port}/a`)).text()).toBe('127.0.0.1 ok');
    expect(s.hits).toEqual(['/redirect', '/a']);
    expect(s.connections()).toBe(1);
  });

  it.each(['/big', '/big-chunked'])('destroys the socket of a response over the size cap (%s)', async (path) => {
    const s = await counting('127.0.0.1');
    const client = createGuardedHttpClient({ allowHosts: [`127.0.0.1:${s.port}`], maxResponseBytes: ONE_MB });
    await client.request(`http://127.0.0.1:${s.port}/a`);
    expect(s.connections()).toBe(1);
    await expectOutbound(client.request(`http://127.0.0.1:${s.port}${path}`), 'response_too_large');
    await vi.waitFor(() => expect(s.openSockets()).toBe(0), { timeout: 2000 });
    expect((await client.request(`http://127.0.0.1:${s.port}/b`)).text()).toBe('127.0.0.1 ok');
    expect(s.connections()).toBe(2);
  });

  it('destroys the socket of a response cut by the deadline or by destroying the stream', async () => {
    const s = await counting('127.0.0.1');
    const client = createGuardedHttpClient({ allowHosts: [`127.0.0.1:${s.port}`] });
    await expectOutbound(client.request(`http://127.0.0.1:${s.port}/hang`, { timeoutMs: 200 }), 'timeout');
    await vi.waitFor(() => expect(s.openSockets()).toBe(0), { timeout: 2000 });
    const streamed = await client.stream(`http://127.0.0.1:${s.port}/hang`);
    await new Promise((resolve) => streamed.body.once('data', resolve));
    streamed.body.destroy();
    await vi.waitFor(() => expect(s.openSockets()).toBe(0), { timeout: 2000 });
    expect((await client.request(`http://127.0.0.1:${s.port}/a`)).text()).toBe('127.0.0.1 ok');
    expect(s.connections()).toBe(3);
  });

  it('a warm pool never lets a request reach an address its own check refused', async () => {
    const s = await counting('127.0.0.1');
    fakeDns.set('localhost', [{ address: '127.0.0.1', family: 4 }]);
    const client = createGuardedHttpClient({ allowHosts: [`localhost:${s.port}`] });
    expect((await client.request(`http://localhost:${s.port}/warm`)).text()).toBe('127.0.0.1 ok');
    await expectOutbound(client.request(`http://127.0.0.1:${s.port}/literal`), 'blocked_address');
    await expectOutbound(client.stream(`http://127.1:${s.port}/literal`), 'blocked_address');
    // Same host, but the allow-list entry is per port.
    await expectOutbound(client.request(`http://localhost:${s.port + 1}/other-port`), 'blocked_address');
    expect(s.hits).toEqual(['/warm']);
    expect(s.connections()).toBe(1);
  });

  it('DNS pinning holds with pooling: a changed answer connects to the newly checked address', async () => {
    const pinned = await counting('127.0.0.2');
    // Same port on another loopback address: only the checked address decides which one is reached.
    const rebound = await counting('127.0.0.1', pinned.port);
    const client = createGuardedHttpClient({ allowHosts: [`rebind.test:${pinned.port}`] });

    fakeDns.set('rebind.test', [{ address: '127.0.0.2', family: 4 }]);
    expect((await client.request(`http://rebind.test:${pinned.port}/1`)).text()).toBe('127.0.0.2 ok');

    fakeDns.set('rebind.test', [{ address: '127.0.0.1', family: 4 }]);
    expect((await client.request(`http://rebind.test:${pinned.port}/2`)).text()).toBe('127.0.0.1 ok');

    // Back to the first answer: reusing its pooled socket is fine.
    fakeDns.set('rebind.test', [{ address: '127.0.0.2', family: 4 }]);
    expect((await client.request(`http://rebind.test:${pinned.port}/3`)).text()).toBe('127.0.0.2 ok');

    expect(pinned.hits).toEqual(['/1', '/3']);
    expect(rebound.hits).toEqual(['/2']);
    expect(pinned.connections()).toBe(1);
    expect(rebound.connections()).toBe(1);
    expect(lookupCalls.hosts).toEqual(['rebind.test', 'rebind.test', 'rebind.test']);
  });
});

describe('inspectTls', () => {
  let tlsServer: import('node:tls').Server;
  let tlsPort: number;
  let resetPort: number;
  let resetServer: import('node:tls').Server;
  beforeAll(async () => {
    const tls = await import('node:tls');
    const { generate } = await import('selfsigned');
    const pems = await generate([{ name: 'commonName', value: 'inspect.example' }], { keyType: 'ec', curve: 'P-256', algorithm: 'sha256' } as never);
    tlsServer = tls.createServer({ key: pems.private, cert: pems.cert }, (socket) => socket.end());
    // Resets every connection right after the handshake.
    resetServer = tls.createServer({ key: pems.private, cert: pems.cert }, (socket) => socket.destroy());
    await new Promise<void>((resolve) => tlsServer.listen(0, '127.0.0.1', resolve));
    await new Promise<void>((resolve) => resetServer.listen(0, '127.0.0.1', resolve));
    tlsPort = (tlsServer.address() as AddressInfo).port;
    resetPort = (resetServer.address() as AddressInfo).port;
  });
  afterAll(async () => {
    await new Promise((resolve) => tlsServer.close(resolve));
    await new Promise((resolve) => resetServer.close(resolve));
  });

  it('refuses a non-public address before connecting, through the same guard', async () => {
    const client = createGuardedHttpClient({ allowHosts: [] });
    await expect(client.inspectTls(`https://127.0.0.1:${tlsPort}/`)).rejects.toMatchObject({ kind: 'blocked_address' });
    const resolved = client.inspectTls(`https://inspect.example:${tlsPort}/`, { resolveAddresses: async () => ['127.0.0.1'] });
    await expect(resolved).rejects.toMatchObject({ kind: 'blocked_address' });
  });

  it('reports the certificate served, untrusted chain included, resolving with the given resolver', async () => {
    const client = createGuardedHttpClient({ allowHosts: [`inspect.example:${tlsPort}`, `inspect.example:${resetPort}`] });
    const asked: string[] = [];
    const served = await client.inspectTls(`https://inspect.example:${tlsPort}/`, {
      resolveAddresses: async (host) => {
        asked.push(host);
        return ['127.0.0.1'];
      },
    });
    expect(asked).toEqual(['inspect.example']);
    expect(served.chainTrusted).toBe(false);
    expect(served.chainError).toMatch(/SELF_SIGNED|self-signed/i);
    expect(served.peer.subject.CN).toBe('inspect.example');
    expect(served.raw.length).toBeGreaterThan(100);
    // A reset right after the handshake still yields the certificate or a mapped error, never an unhandled one.
    const reset = await client.inspectTls(`https://inspect.example:${resetPort}/`, { resolveAddresses: async () => ['127.0.0.1'] }).then(
      (r) => r.peer.subject.CN,
      (e: OutboundError) => e.kind,
    );
    expect(['inspect.example', 'connection_failed', 'tls_error']).toContain(reset);
  });

  it('only https has a certificate; a silent server times out', async () => {
    const client = createGuardedHttpClient({ allowHosts: ['127.0.0.1:1'] });
    await expect(client.inspectTls('http://127.0.0.1:1/')).rejects.toMatchObject({ kind: 'invalid_url' });
    const silent = await startServer('127.0.0.1', () => undefined);
    const slow = createGuardedHttpClient({ allowHosts: [`127.0.0.1:${silent.port}`] });
    // A plain-HTTP server never answers a ClientHello.
    await expect(slow.inspectTls(`https://127.0.0.1:${silent.port}/`, { timeoutMs: 300 })).rejects.toMatchObject({
      kind: expect.stringMatching(/timeout|tls_error|connection_failed/),
    });
    await stopServer(silent);
  });
});
