import type { AddressInfo } from 'node:net';
import { connect as tlsConnect, createSecureContext, createServer, type SecureContext, type TLSSocket } from 'node:tls';
import { generate } from 'selfsigned';

/**
 * A TLS-terminating proxy in front of the service, as Caddy's on-demand TLS runs it: on each handshake for a name it
 * has no certificate for, it asks the service's `ask` endpoint (route-public) and only then issues one from its own
 * CA; the decrypted connection is relayed to the service's listener (re-encrypted, since the service speaks HTTPS).
 * `serve` overrides what it presents for a name (a certificate for another name, a self-signed one).
 */
export interface TestTlsProxy {
  port: number;
  caPem: string;
  /** Every ask: the hostname and the status the service answered. */
  asks: Array<{ hostname: string; status: number }>;
  serve(hostname: string, kind: 'wrong-name' | 'self-signed' | 'expired'): void;
  setBackend(port: number): void;
  close(): Promise<void>;
}

const DAY = 24 * 3600 * 1000;

async function leaf(names: string[], options: { ca?: { key: string; cert: string }; notBefore?: Date; notAfter?: Date } = {}) {
  const pems = await generate([{ name: 'commonName', value: names[0]! }], {
    keyType: 'ec',
    curve: 'P-256',
    algorithm: 'sha256',
    notBeforeDate: options.notBefore ?? new Date(Date.now() - DAY),
    notAfterDate: options.notAfter ?? new Date(Date.now() + 30 * DAY),
    extensions: [
      { name: 'basicConstraints', cA: false },
      { name: 'keyUsage', digitalSignature: true, keyEncipherment: true },
      { name: 'extKeyUsage', serverAuth: true },
      { name: 'subjectAltName', altNames: names.map((value) => ({ type: 2, value })) },
    ],
    ...(options.ca ? { ca: options.ca } : {}),
  } as never);
  return { key: pems.private, cert: pems.cert };
}

export async function startTlsProxy(): Promise<TestTlsProxy> {
  const ca = await generate([{ name: 'commonName', value: 'Test Proxy CA' }], {
    keyType: 'ec',
    curve: 'P-256',
    algorithm: 'sha256',
    notAfterDate: new Date(Date.now() + 365 * DAY),
    extensions: [
      { name: 'basicConstraints', cA: true },
      { name: 'keyUsage', keyCertSign: true, cRLSign: true, digitalSignature: true },
    ],
  } as never);
  const caPair = { key: ca.private, cert: ca.cert };
  const contexts = new Map<string, SecureContext>();
  const overrides = new Map<string, 'wrong-name' | 'self-signed' | 'expired'>();
  const asks: TestTlsProxy['asks'] = [];
  let backendPort = 0;
  const open = new Set<TLSSocket>();

  async function askService(hostname: string) {
    // The service's own listener serves a self-signed certificate for localhost; the proxy is configured to accept it.
    const status = await new Promise<number>((resolve) => {
      const socket = tlsConnect({ host: '127.0.0.1', port: backendPort, rejectUnauthorized: false }, () => {
        socket.write(`GET /api/v1/domains/route-public?domain=${encodeURIComponent(hostname)} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n`);
      });
      let head = '';
      socket.on('data', (chunk) => {
        head += chunk.toString('latin1');
      });
      socket.on('end', () => resolve(Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1] ?? 0)));
      socket.on('error', () => resolve(0));
    });
    asks.push({ hostname, status });
    return status === 200;
  }

  async function contextFor(hostname: string) {
    const known = contexts.get(hostname);
    if (known) return known;
    if (!(await askService(hostname))) return null;
    const override = overrides.get(hostname);
    const pair =
      override === 'wrong-name'
        ? await leaf(['someone-else.example'], { ca: caPair })
        : override === 'self-signed'
          ? await leaf([hostname])
          : override === 'expired'
            ? await leaf([hostname], { ca: caPair, notBefore: new Date(Date.now() - 60 * DAY), notAfter: new Date(Date.now() - DAY) })
            : await leaf([hostname], { ca: caPair });
    const context = createSecureContext(pair);
    contexts.set(hostname, context);
    return context;
  }

  const server = createServer(
    {
      SNICallback: (servername, callback) => {
        contextFor(servername.toLowerCase()).then(
          (context) => (context ? callback(null, context) : callback(new Error(`${servername} is not served here`))),
          (error: Error) => callback(error),
        );
      },
    },
    (client: TLSSocket) => {
      open.add(client);
      client.on('close', () => open.delete(client));
      const upstream = tlsConnect({ host: '127.0.0.1', port: backendPort, rejectUnauthorized: false });
      client.pipe(upstream).pipe(client);
      client.on('error', () => upstream.destroy());
      upstream.on('error', () => client.destroy());
    },
  );
  server.on('tlsClientError', () => undefined);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    caPem: ca.cert,
    asks,
    serve: (hostname, kind) => {
      overrides.set(hostname, kind);
      contexts.delete(hostname);
    },
    setBackend: (port) => {
      backendPort = port;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        // Open relays would hold close() forever.
        for (const socket of open) socket.destroy();
      }),
  };
}
