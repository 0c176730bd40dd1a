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
import { Agent as HttpAgent, request as httpRequest, type IncomingMessage } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import { forkJobWorker, serveJobs, type JobWorker } from './job-worker.ts';

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
  if (!Number.isInteger(job.connections) || job.connections < 1 || job.connections > MAX_CONNECTIONS)
    throw new Error(`connections must be 1..${MAX_CONNECTIONS}`);
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

export type LoadWorker = JobWorker<LoadJob, LoadResult>;

/** Forks this file as a child process running under the tsx loader; jobs run one at a time. */
export function forkLoadWorker(): LoadWorker {
  // Hard bound: the job's own length plus time for the child to start and in-flight requests to finish.
  return forkJobWorker(import.meta.url, { BENCH_LOAD_CHILD: '1' }, (job: LoadJob) => job.warmupMs + job.durationMs + REQUEST_TIMEOUT_MS + 20_000);
}

if (process.env.BENCH_LOAD_CHILD === '1' && typeof process.send === 'function') serveJobs(runLoad);
