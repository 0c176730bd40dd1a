import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:https';
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
