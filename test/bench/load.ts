/**
 * A small closed-loop HTTP(S) load generator for test/bench/http-bench.ts (no autocannon: node:http /
 * node:https with keep-alive agents only).
 *
 * `connections` loops each keep exactly one request in flight on a keep-alive agent capped at
 * `connections` sockets, so the server sees a fixed number of persistent connections. A warm-up phase
 * runs first on the same connections and is not recorded; then only responses that complete inside the
 * measurement window count. Bounded in time (warm-up + duration, each request times out) and in
 * target (127.0.0.1 only).
 *
 * Why a child process: the benchmark, its servers and this generator would otherwise share one event
 * loop, and on a 2-core machine the client's own request/response work would be charged to the server.
 * http-bench.ts therefore forks this file (process.execPath + the tsx loader, `forkLoadWorker`) and
 * sends it jobs over IPC: the generator gets its own thread, heap and GC, the OS can schedule it on the
 * other core, and baseline and service are driven the same way. (A worker_thread would also work, but a
 * child process also keeps the client's libuv thread pool and GC pauses out of the server process.)
 */
import { fork, type ChildProcess } from 'node:child_process';
import { Agent as HttpAgent, request as httpRequest, type IncomingMessage } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';

export interface LoadJob {
  /** Origin, e.g. https://127.0.0.1:1234 (only 127.0.0.1 is accepted). */
  origin: string;
  path: string;
  headers: Record<string, string>;
  connections: number;
  warmupMs: number;
  durationMs: number;
  /** Status that counts as a success; anything else counts as an error. */
  expectStatus: number;
}

export interface LoadResult {
  /** Successful responses completed inside the measurement window. */
  requests: number;
  /** Failed requests (socket errors, timeouts, unexpected status) inside the window. */
  errors: number;
  firstError?: string;
  /** Length of the measurement window. */
  elapsedMs: number;
  /** Latency of each successful request in the window, milliseconds, unsorted. */
  latenciesMs: Float64Array;
  /** Client CPU (user + system) over the window divided by the window: 1.0 = one core saturated. */
  clientCpuCores: number;
  /** Sockets opened during the whole job (warm-up included); ~connections when keep-alive works. */
  socketsOpened: number;
}

const MAX_CONNECTIONS = 256;
const MAX_PHASE_MS = 120_000;
const REQUEST_TIMEOUT_MS = 10_000;

class Samples {
  private buf = new Float64Array(1 << 14);
  length = 0;
  push(v: number) {
    if (this.length === this.buf.length) {
      const next = new Float64Array(this.buf.length * 2);
      next.set(this.buf);
      this.buf = next;
    }
    this.buf[this.length++] = v;
  }
  toArray() {
    return this.buf.slice(0, this.length);
  }
}

function validate(job: LoadJob): URL {
  const url = new URL(job.path, job.origin);
  if (url.hostname !== '127.0.0.1') throw new Error(`load generator only targets 127.0.0.1, not ${url.hostname}`);
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new Error(`unsupported protocol ${url.protocol}`);
  if (!Number.isInteger(job.connections) || job.connections < 1 || job.connections > MAX_CONNECTIONS) throw new Error(`connections must be 1..${MAX_CONNECTIONS}`);
  for (const ms of [job.warmupMs, job.durationMs]) {
    if (!Number.isFinite(ms) || ms < 0 || ms > MAX_PHASE_MS) throw new Error(`phase durations must be 0..${MAX_PHASE_MS} ms`);
  }
  if (job.durationMs <= 0) throw new Error('durationMs must be positive');
  return url;
}

/** Runs one job in this process. */
export async function runLoad(job: LoadJob): Promise<LoadResult> {
  const url = validate(job);
  const tls = url.protocol === 'https:';
  const agentOptions = { keepAlive: true, maxSockets: job.connections, maxFreeSockets: job.connections, keepAliveMsecs: 1_000 };
  const agent = tls ? new HttpsAgent({ ...agentOptions, rejectUnauthorized: false }) : new HttpAgent(agentOptions);
  const request = tls ? httpsRequest : httpRequest;
  const options = { host: '127.0.0.1', port: Number(url.port), path: url.pathname + url.search, method: 'GET', headers: job.headers, agent };

  let socketsOpened = 0;
  const once = () =>
    new Promise<{ status: number } | { error: string }>((resolve) => {
      const req = request(options, (res: IncomingMessage) => {
        res.on('error', (e) => resolve({ error: e.message }));
        res.on('end', () => resolve({ status: res.statusCode ?? 0 }));
        res.resume();
      });
      req.on('socket', () => {
        if (!req.reusedSocket) socketsOpened++;
      });
      req.setTimeout(REQUEST_TIMEOUT_MS, () => req.destroy(new Error('request timed out')));
      req.on('error', (e) => resolve({ error: e.message }));
      req.end();
    });

  const samples = new Samples();
  let errors = 0;
  let firstError: string | undefined;
  let measuring = false;
  let stopped = false;
  let windowStart = 0;
  let windowEnd = Infinity;
  let cpuAtStart = process.cpuUsage();

  const loop = async () => {
    while (!stopped) {
      const t0 = performance.now();
      const outcome = await once();
      const t1 = performance.now();
      const ok = 'status' in outcome && outcome.status === job.expectStatus;
      if (measuring && t1 <= windowEnd) {
        if (ok) samples.push(t1 - t0);
        else {
          errors++;
          firstError ??= 'error' in outcome ? outcome.error : `unexpected status ${outcome.status}`;
        }
      }
      // A failing target must not turn this loop into a hot spin.
      if (!ok) await new Promise((r) => setTimeout(r, 10));
    }
  };

  const timers: NodeJS.Timeout[] = [];
  const finished = new Promise<void>((resolve) => {
    timers.push(
      setTimeout(() => {
        windowStart = performance.now();
        cpuAtStart = process.cpuUsage();
        measuring = true;
      }, job.warmupMs),
    );
    timers.push(
      setTimeout(() => {
        windowEnd = performance.now();
        stopped = true;
        resolve();
      }, job.warmupMs + job.durationMs),
    );
  });
  const loops = Array.from({ length: job.connections }, loop);
  await finished;
  const cpu = process.cpuUsage(cpuAtStart);
  // In-flight requests finish (or time out) before the agent is torn down; they are not counted.
  await Promise.all(loops);
  for (const t of timers) clearTimeout(t);
  agent.destroy();

  const elapsedMs = windowEnd - windowStart;
  return {
    requests: samples.length,
    errors,
    firstError,
    elapsedMs,
    latenciesMs: samples.toArray(),
    clientCpuCores: (cpu.user + cpu.system) / 1000 / elapsedMs,
    socketsOpened,
  };
}

/** Nearest-rank percentile of an ascending array. */
export function percentile(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return NaN;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))]!;
}

// ---- child-process plumbing ----------------------------------------------------------------------

type ToChild = { id: number; job: LoadJob };
type FromChild = { id: number; result?: LoadResult; error?: string };

export interface LoadWorker {
  run(job: LoadJob): Promise<LoadResult>;
  close(): Promise<void>;
}

/** Forks this file as a child process running under the tsx loader; jobs run one at a time. */
export function forkLoadWorker(): LoadWorker {
  const tsxLoader = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href;
  const child: ChildProcess = fork(fileURLToPath(import.meta.url), [], {
    execPath: process.execPath,
    execArgv: ['--import', tsxLoader],
    env: { ...process.env, BENCH_LOAD_CHILD: '1' },
    // The child's stdout goes to our stderr: stdout is reserved for the JSON result lines.
    stdio: ['ignore', 2, 2, 'ipc'],
    serialization: 'advanced',
  });
  let nextId = 0;
  const pending = new Map<number, { resolve(r: LoadResult): void; reject(e: Error): void; timer: NodeJS.Timeout }>();
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.on('message', (message: FromChild) => {
    const entry = pending.get(message.id);
    if (!entry) return;
    pending.delete(message.id);
    clearTimeout(entry.timer);
    if (message.result) entry.resolve(message.result);
    else entry.reject(new Error(`load generator: ${message.error ?? 'no result'}`));
  });
  child.once('exit', (code, signal) => {
    for (const entry of pending.values()) {
      clearTimeout(entry.timer);
      entry.reject(new Error(`load generator exited (code ${code}, signal ${signal})`));
    }
    pending.clear();
  });
  return {
    run(job) {
      const id = ++nextId;
      return new Promise<LoadResult>((resolve, reject) => {
        // Hard bound: the job's own length plus time for the child to start and in-flight requests to finish.
        const timer = setTimeout(() => {
          pending.delete(id);
          child.kill('SIGKILL');
          reject(new Error('load generator did not answer in time; killed it'));
        }, job.warmupMs + job.durationMs + REQUEST_TIMEOUT_MS + 20_000);
        pending.set(id, { resolve, reject, timer });
        child.send({ id, job } satisfies ToChild);
      });
    },
    async close() {
      if (child.exitCode === null && child.signalCode === null) {
        if (child.connected) child.disconnect();
        const killer = setTimeout(() => child.kill('SIGKILL'), 5_000);
        await exited;
        clearTimeout(killer);
      }
    },
  };
}

if (process.env.BENCH_LOAD_CHILD === '1' && typeof process.send === 'function') {
  const send = process.send.bind(process);
  // Jobs are serialised: a second job waits for the first, so two never compete for this core.
  let queue = Promise.resolve();
  process.on('message', (message: ToChild) => {
    queue = queue.then(async () => {
      try {
        send({ id: message.id, result: await runLoad(message.job) } satisfies FromChild);
      } catch (error) {
        send({ id: message.id, error: error instanceof Error ? error.message : String(error) } satisfies FromChild);
      }
    });
  });
  // Exits by itself when the parent disconnects the IPC channel (nothing else keeps it alive).
}
