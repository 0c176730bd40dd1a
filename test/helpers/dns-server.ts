import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createServer } from 'node:net';

/**
 * A real DNS server on 127.0.0.1: `pebble-challtestsrv` from Debian's `pebble` package, its records set over its
 * management HTTP API. Outside CI a machine without it skips the files that need it; CI installs it.
 */
const BINARY = '/usr/bin/pebble-challtestsrv';
export const dnsServerRunnable = existsSync(BINARY) || Boolean(process.env.CI);

export interface TestDnsServer {
  /** `127.0.0.1:<port>`, for DNS_SERVERS. */
  address: string;
  setTxt(name: string, value: string): Promise<void>;
  clearTxt(name: string): Promise<void>;
  setCname(name: string, target: string): Promise<void>;
  addA(name: string, addresses: string[]): Promise<void>;
  addCaa(name: string, policies: Array<{ tag: string; value: string }>): Promise<void>;
  /** The next answers for this name are SERVFAIL (a failure to ask, not an absence). */
  servfail(name: string): Promise<void>;
  clearServfail(name: string): Promise<void>;
  close(): Promise<void>;
}

export const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as { port: number };
      probe.close(() => resolve(port));
    });
  });

const fqdn = (name: string) => (name.endsWith('.') ? name : `${name}.`);

export async function startDnsServer(): Promise<TestDnsServer> {
  const [dnsPort, managementPort] = [await freePort(), await freePort()];
  const child: ChildProcess = spawn(
    BINARY,
    [
      '-dns01',
      `127.0.0.1:${dnsPort}`,
      '-management',
      `127.0.0.1:${managementPort}`,
      '-http01',
      '',
      '-https01',
      '',
      '-tlsalpn01',
      '',
      '-defaultIPv4',
      '',
      '-defaultIPv6',
      '',
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  child.stderr?.resume();
  const manage = async (path: string, body: Record<string, unknown>) => {
    const res = await fetch(`http://127.0.0.1:${managementPort}/${path}`, { method: 'POST', body: JSON.stringify(body) });
    if (!res.ok) throw new Error(`challtestsrv ${path}: ${res.status} ${await res.text()}`);
  };
  // Ready once its management API answers (bounded: 5 s).
  for (let i = 0; ; i++) {
    try {
      await manage('clear-txt', { host: 'ready.invalid.' });
      break;
    } catch (error) {
      if (i > 100) throw error;
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  return {
    address: `127.0.0.1:${dnsPort}`,
    setTxt: (name, value) => manage('set-txt', { host: fqdn(name), value }),
    clearTxt: (name) => manage('clear-txt', { host: fqdn(name) }),
    setCname: (name, target) => manage('set-cname', { host: fqdn(name), target: fqdn(target) }),
    addA: (name, addresses) => manage('add-a', { host: fqdn(name), addresses }),
    addCaa: (name, policies) => manage('add-caa', { host: fqdn(name), policies }),
    servfail: (name) => manage('set-servfail', { host: fqdn(name) }),
    clearServfail: (name) => manage('clear-servfail', { host: fqdn(name) }),
    close: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      }),
  };
}
