import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { request } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { generate } from 'selfsigned';
import { freePort } from './dns-server.ts';

/**
 * A real ACME CA on 127.0.0.1: `pebble` from Debian's `pebble` package, resolving names through the test DNS
 * server and validating HTTP-01 on the service's own port. Its HTTPS endpoint uses a throw-away certificate the
 * service is told to trust (OUTBOUND_CA_FILE). Outside CI a machine without pebble skips the files that need it.
 */
const BINARY = '/usr/bin/pebble';
export const acmeCaRunnable = existsSync(BINARY) || Boolean(process.env.CI);

export interface TestAcmeCa {
  directoryUrl: string;
  hostPort: string;
  /** The PEM file of the certificate pebble's own HTTPS endpoint presents (for OUTBOUND_CA_FILE). */
  caFile: string;
  /** The root that signs the certificates pebble issues. */
  issuedRoot(): Promise<string>;
  close(): Promise<void>;
}

/** Ports first: the service must know the directory URL before it starts, and pebble the service's port after. */
export async function reserveAcmeCa() {
  const [port, managementPort] = [await freePort(), await freePort()];
  const dir = mkdtempSync(join(tmpdir(), 'pebble-'));
  const pems = await generate([{ name: 'commonName', value: 'pebble.test' }], {
    keyType: 'ec',
    curve: 'P-256',
    algorithm: 'sha256',
    notAfterDate: new Date(Date.now() + 7 * 24 * 3600 * 1000),
    extensions: [
      { name: 'basicConstraints', cA: false },
      { name: 'extKeyUsage', serverAuth: true },
      { name: 'subjectAltName', altNames: [{ type: 7, ip: '127.0.0.1' }] },
    ],
  } as never);
  const caFile = join(dir, 'cert.pem');
  writeFileSync(caFile, pems.cert);
  writeFileSync(join(dir, 'key.pem'), pems.private);
  return {
    directoryUrl: `https://127.0.0.1:${port}/dir`,
    hostPort: `127.0.0.1:${port}`,
    caFile,
    async start(options: { dnsServer: string; httpPort: number }): Promise<TestAcmeCa> {
      const config = {
        pebble: {
          listenAddress: `127.0.0.1:${port}`,
          managementListenAddress: `127.0.0.1:${managementPort}`,
          certificate: caFile,
          privateKey: join(dir, 'key.pem'),
          httpPort: options.httpPort,
          tlsPort: options.httpPort,
          ocspResponderURL: '',
          externalAccountBindingRequired: false,
        },
      };
      writeFileSync(join(dir, 'pebble.json'), JSON.stringify(config));
      const child: ChildProcess = spawn(BINARY, ['-config', join(dir, 'pebble.json'), '-dnsserver', options.dnsServer], {
        stdio: ['ignore', 'ignore', 'pipe'],
        env: { ...process.env, PEBBLE_VA_NOSLEEP: '1', PEBBLE_WFE_NONCEREJECT: '0', PEBBLE_AUTHZREUSE: '0' },
      });
      child.stderr?.resume();
      const get = (path: string, at = managementPort) =>
        new Promise<{ status: number; body: string }>((resolve, reject) => {
          const req = request({ host: '127.0.0.1', port: at, path, ca: pems.cert, timeout: 2_000 }, (res) => {
            let body = '';
            res.on('data', (c) => (body += c));
            res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
          });
          req.on('error', reject);
          req.on('timeout', () => req.destroy(new Error('timeout')));
          req.end();
        });
      for (let i = 0; ; i++) {
        try {
          if ((await get('/dir', port)).status === 200) break;
        } catch (error) {
          if (i > 100) throw error;
        }
        await new Promise((r) => setTimeout(r, 100));
      }
      return {
        directoryUrl: `https://127.0.0.1:${port}/dir`,
        hostPort: `127.0.0.1:${port}`,
        caFile,
        issuedRoot: async () => (await get('/roots/0')).body,
        close: () =>
          new Promise<void>((resolve) => {
            const done = () => {
              rmSync(dir, { recursive: true, force: true });
              resolve();
            };
            if (child.exitCode !== null) return done();
            child.once('exit', done);
            child.kill('SIGTERM');
          }),
      };
    },
  };
}

export interface RefusingAcmeCa {
  /** http://127.0.0.1:<port>/dir, for ACME_DIRECTORY_URL. */
  directoryUrl: string;
  /** 127.0.0.1:<port>, for OUTBOUND_ALLOW_HOSTS. */
  hostPort: string;
  /** Method and path of every request, in order. */
  requests: string[];
  close(): Promise<void>;
}

/**
 * A CA speaking just enough ACME (RFC 8555) to refuse an order, for what pebble cannot say: its directory, nonces,
 * a new account it accepts, and every new order answered 400 `rejectedIdentifier` with `detail` as the problem's
 * detail (JSON's escapes carry a NUL or a lone surrogate as they are). Plain HTTP on 127.0.0.1; signatures are
 * not checked.
 */
export async function startRefusingAcmeCa(detail: string): Promise<RefusingAcmeCa> {
  const requests: string[] = [];
  let origin = '';
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      requests.push(`${req.method} ${req.url}`);
      const headers = { 'replay-nonce': randomBytes(16).toString('base64url'), 'cache-control': 'no-store' };
      const json = (status: number, body: unknown, more: Record<string, string> = {}) =>
        res.writeHead(status, { ...headers, 'content-type': 'application/json', ...more }).end(JSON.stringify(body));
      if (req.method === 'GET' && req.url === '/dir')
        return json(200, { newNonce: `${origin}/nonce`, newAccount: `${origin}/account`, newOrder: `${origin}/order` });
      if (req.url === '/nonce') return res.writeHead(req.method === 'HEAD' ? 200 : 204, headers).end();
      if (req.method === 'POST' && req.url === '/account')
        return json(201, { status: 'valid', orders: `${origin}/account/1/orders` }, { location: `${origin}/account/1` });
      if (req.method === 'POST' && req.url === '/order')
        return json(400, { type: 'urn:ietf:params:acme:error:rejectedIdentifier', detail, status: 400 }, { 'content-type': 'application/problem+json' });
      return json(404, { type: 'urn:ietf:params:acme:error:malformed', detail: 'not found', status: 404 }, { 'content-type': 'application/problem+json' });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  origin = `http://127.0.0.1:${port}`;
  return {
    directoryUrl: `${origin}/dir`,
    hostPort: `127.0.0.1:${port}`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
