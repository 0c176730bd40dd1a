import { type ChildProcess, spawn } from 'node:child_process';
import { createSocket } from 'node:dgram';
import { existsSync, readFileSync } from 'node:fs';
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

/** The lowest port of the kernel's ephemeral range (for `listen(0)` and outgoing sockets); Linux's default when unreadable. */
function ephemeralLow(): number {
  try {
    const low = Number.parseInt(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8'), 10);
    if (Number.isInteger(low)) return low;
  } catch {
    // not Linux: the default below
  }
  return 32768;
}

/** Whether 127.0.0.1:port can be bound now, over TCP and UDP (the DNS server listens on both). */
async function bindable(port: number): Promise<boolean> {
  const tcp = createServer();
  const udp = createSocket('udp4');
  const bound = await Promise.all([
    new Promise<boolean>((resolve) => {
      tcp.once('error', () => resolve(false));
      tcp.listen(port, '127.0.0.1', () => resolve(true));
    }),
    new Promise<boolean>((resolve) => {
      udp.once('error', () => resolve(false));
      udp.bind(port, '127.0.0.1', () => resolve(true));
    }),
  ]);
  await Promise.all([new Promise((resolve) => tcp.close(resolve)), new Promise<void>((resolve) => udp.close(() => resolve()))]);
  return bound.every(Boolean);
}

const LOWEST_PORT = 10_000;

/**
 * A port for a child process (pebble, pebble-challtestsrv) to listen on, chosen below the ephemeral range. It is
 * released before the child binds it, seconds later (the service must know the CA's address before it starts); a
 * port from the ephemeral range could meanwhile go to any `listen(0)` or outgoing socket of the test files running
 * in parallel (a test app's listener once took the CA's port, and the CA's readiness check met the app's
 * certificate). Below the range only another choice like this one can collide, and the probe sees a taken port.
 */
export async function freePort(): Promise<number> {
  const low = ephemeralLow();
  for (let attempt = 0; attempt < 100 && low > LOWEST_PORT; attempt++) {
    const port = LOWEST_PORT + Math.floor(Math.random() * (low - LOWEST_PORT));
    if (await bindable(port)) return port;
  }
  throw new Error(`no free port found between ${LOWEST_PORT} and ${low}`);
}

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
