/**
 * Chat benchmark: `npm run bench:chat`.
 *
 * Starts the local provider mock (test/helpers/provider-mock-servers.ts) in its own process, as a real upstream
 * is (in ours, its request handling would run on the service's event loop), and the service in-process
 * (bench-kit's startBenchService: embedded PGlite in a temp DATA_DIR, or a scratch PostgreSQL database on
 * DATABASE_URL's server; rate limits raised, OUTBOUND_ALLOW_HOSTS = the mock's 127.0.0.1:port), signs up
 * one owner and creates one chat interface (+ API key) per connector type, each pointed at the mock route
 * of its wire format with an explicit endpointType:
 *     flow -> /api/v1/run/bench-flow       openai -> /v1/chat/completions     messages -> /v1/messages
 *     generation -> /v1beta/models/gemini-2.5-flash:generateContent        generic -> /generic
 * Then, all on 127.0.0.1, with the load driven from a forked child process (its own event loop and core,
 * as test/bench/load.ts explains; load.ts itself only sends GETs without a body, hence the small POST /
 * first-byte generator at the end of this file):
 *
 * 1. Latency per connector type: POST /api/v1/chat/{slug} (API key, {message}, a new session each time)
 *    against the SAME upstream request sent directly to the mock over plain HTTP (the exact method, URL,
 *    headers and body the service sent, captured from the mock) by the same generator, alternately, in
 *    BENCH_ROUNDS rounds. added_ms = our p50 - direct p50; target <= 2 ms.
 *    To explain the figure: a bare node:https server and a bare node:http server echoing our very response
 *    bytes to the very request (TLS cost = https echo - http echo), an in-process profile of the parts of
 *    the chat path, and the number of database statements per chat counted at the driver.
 * 2. Streaming time to first byte, for the types whose upstream streams (flow, openai, messages,
 *    generation): request start -> first response chunk holding an SSE `data: {"type":"delta"` event through
 *    our endpoint (Accept: text/event-stream), vs request start -> first chunk holding the first text delta
 *    of the upstream's own stream (the event our first delta is made from) sent directly to the mock.
 *    The mock waits ~2 ms between stream events; both sides wait the same. Target <= 3 ms added.
 * 3. Knowledge-base chat on SciFact: the corpus (every abstract, title + "\n\n" + text, one `<id>.txt`)
 *    through the real upload endpoint (BENCH_UPLOAD_CONCURRENCY in flight) into one knowledge base
 *    (chunkSize 8000 / overlap 0 as retrieval-bench.ts, the default retrieval depth, extractive answers),
 *    an interface with configId, then each SciFact test query (queries.jsonl ids in qrels/test.tsv) once as
 *    a chat message, sequentially after a warm-up: p50/p99. Baseline in the same run: answerQuery() (what
 *    the chat path calls) in-process on the same queries; the POST /api/v1/knowledge-base/query endpoint
 *    rides along.
 *
 * stdout: one JSON line per figure, nothing else (progress and diagnostics go to stderr):
 *   {"bench":"chat","type":"openai","metric":"p50_ms"|"p99_ms","value":ours,"baseline":"upstream-direct",
 *    "baseline_value":...,"added_ms":...,"target_ms":2,"meets_target":...}
 *   {"bench":"chat","type":...,"metric":"ttfb_p50_ms"|"ttfb_p99_ms",...,"target_ms":3,...}
 *   {"bench":"chat","metric":"echo_p50_ms"|"echo_p99_ms","value":https echo,"baseline":"node:http echo",...}
 *   {"bench":"chat-profile","part":...,"metric":"us_per_call",...} and {"bench":"chat-profile","metric":"db_statements_per_chat",...}
 *   {"bench":"chat","type":"knowledge-base","dataset":"scifact","metric":"p50_ms"|"p99_ms",...,"baseline":"answerQuery-in-process",...}
 *   {"bench":"chat","type":"knowledge-base","dataset":"scifact","metric":"ingest_seconds",...}
 *
 * Knobs (environment):
 *   BENCH_DURATION_MS         measurement time per target (split over the rounds), default 3000 (500..60000)
 *   BENCH_WARMUP_MS           warm-up before each measured window, default 500 (0..10000)
 *   BENCH_SERVICE_WARMUP_MS   before the latency phase, each type's chat is sent for this long, default 2000
 *                             (0..60000): the service reaches its steady state (JIT, WebAssembly tier-up)
 *   BENCH_ROUNDS              alternating rounds (ours, direct / direct, ours ...), default 2 (1..6)
 *   BENCH_CONNECTIONS         keep-alive connections of the generator, default 1 = sequential (1..64)
 *   BENCH_PROFILE_ITERATIONS  calls per profiled part, default 300 (50..20000)
 *   BENCH_KB_DOCS             0 = the whole SciFact corpus (default); N = the judged documents plus others up
 *                             to N in all (reported as "subset": true)
 *   BENCH_SCIFACT_DIR         dataset folder, default ../shared/datasets/scifact beside the repository
 *   BENCH_UPLOAD_CONCURRENCY  uploads in flight, default 8 (1..64)
 *   BENCH_JOB_CONCURRENCY     the service's JOB_CONCURRENCY, default 4 (its own default; 1..32)
 *   BENCH_TYPES               comma list of connector types, in the order measured (default all five)
 *   BENCH_PHASES              comma list of latency,stream,profile,kb (default all)
 *   BENCH_CPU_PROFILE         a folder: a V8 CPU profile of this process (the service) is written there for each
 *                             type's measured windows of our endpoint only (`chat-<type>.cpuprofile`), to see
 *                             where the added time goes (open in Chrome DevTools or speedscope)
 *   BENCH_TIMEOUT_S           hard bound on the whole run, default 570 (60..3600): then it cleans up and exits 1
 *   DATABASE_URL              optional postgres:// URL of a server on which a scratch database is created and dropped
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import {
  Agent as HttpAgent,
  createServer as createHttpServer,
  request as httpRequest,
  type IncomingMessage,
  type Server as HttpServer,
  type ServerResponse,
} from 'node:http';
import { Agent as HttpsAgent, createServer as createHttpsServer, request as httpsRequest } from 'node:https';
import type { AddressInfo } from 'node:net';
import { availableParallelism, loadavg } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { BenchService, CpuProfile } from './bench-kit.ts';
import { forkJobWorker, serveJobs, type JobWorker } from './job-worker.ts';
import type { ProviderMockRequest } from '../helpers/provider-mock-servers.ts';
import type { ProviderMockProcess } from './provider-mock-process.ts';

// =====================================================================================================
// The load generator (runs in a forked child): POST with a body over keep-alive connections, recording
// the whole response time and, optionally, the time to the first chunk after which the body so far
// matches a pattern (the first SSE delta). Two kinds of job: timed (warm-up + window, one body) and list
// (each body once, in order).
// =====================================================================================================

const CHILD_ENV = 'BENCH_CHAT_LOAD_CHILD';
const REQUEST_TIMEOUT_MS = 15_000;
const MAX_PHASE_MS = 120_000;

interface LoadJob {
  kind: 'timed' | 'list';
  /** http(s)://127.0.0.1:<port> */
  origin: string;
  path: string;
  headers: Record<string, string>;
  /** timed: bodies[0] on every request; list: each once. */
  bodies: string[];
  connections: number;
  warmupMs: number;
  durationMs: number;
  expectStatus: number;
  /** Regex source the complete body must match for the request to count as a success. */
  expectBody?: string;
  /** Regex source: records the time to the first chunk after which the body received so far matches. */
  firstDelta?: string;
}

interface LoadResult {
  requests: number;
  errors: number;
  firstError?: string;
  elapsedMs: number;
  latenciesMs: Float64Array;
  /** Same order as latenciesMs; NaN without firstDelta. */
  firstDeltaMs: Float64Array;
  /** Client CPU over the window / the window (1 = one core saturated). */
  clientCpuCores: number;
  socketsOpened: number;
}

class Samples {
  private buf = new Float64Array(1 << 12);
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

type Outcome = { ok: true; ms: number; deltaMs: number } | { ok: false; error: string };

async function runLoadJob(job: LoadJob): Promise<LoadResult> {
  const url = new URL(job.path, job.origin);
  if (url.hostname !== '127.0.0.1') throw new Error(`the generator only targets 127.0.0.1, not ${url.hostname}`);
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new Error(`unsupported protocol ${url.protocol}`);
  if (!Number.isInteger(job.connections) || job.connections < 1 || job.connections > 64) throw new Error('connections must be 1..64');
  if (job.bodies.length === 0) throw new Error('no request body');
  for (const ms of [job.warmupMs, job.durationMs]) if (!(ms >= 0 && ms <= MAX_PHASE_MS)) throw new Error(`phases must be 0..${MAX_PHASE_MS} ms`);
  const tls = url.protocol === 'https:';
  const agentOptions = { keepAlive: true, maxSockets: job.connections, maxFreeSockets: job.connections, keepAliveMsecs: 1_000 };
  const agent = tls ? new HttpsAgent({ ...agentOptions, rejectUnauthorized: false }) : new HttpAgent(agentOptions);
  const send = tls ? httpsRequest : httpRequest;
  const expectBody = job.expectBody ? new RegExp(job.expectBody) : undefined;
  const firstDelta = job.firstDelta ? new RegExp(job.firstDelta) : undefined;
  const port = Number(url.port);
  const path = url.pathname + url.search;
  let socketsOpened = 0;

  const once = (body: string) =>
    new Promise<Outcome>((resolve) => {
      const headers = { ...job.headers, 'content-length': String(Buffer.byteLength(body)) };
      const t0 = performance.now();
      let tDelta = NaN;
      const req = send({ host: '127.0.0.1', port, path, method: 'POST', headers, agent }, (res: IncomingMessage) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          text += chunk;
          if (firstDelta && Number.isNaN(tDelta) && firstDelta.test(text)) tDelta = performance.now();
        });
        res.on('error', (e) => resolve({ ok: false, error: e.message }));
        res.on('end', () => {
          const t1 = performance.now();
          const status = res.statusCode ?? 0;
          if (status !== job.expectStatus) return resolve({ ok: false, error: `status ${status}: ${text.slice(0, 300)}` });
          if (expectBody && !expectBody.test(text)) return resolve({ ok: false, error: `unexpected body: ${text.slice(0, 300)}` });
          if (firstDelta && Number.isNaN(tDelta)) return resolve({ ok: false, error: `no first delta in: ${text.slice(0, 300)}` });
          resolve({ ok: true, ms: t1 - t0, deltaMs: tDelta - t0 });
        });
      });
      req.on('socket', () => {
        if (!req.reusedSocket) socketsOpened++;
      });
      req.setTimeout(REQUEST_TIMEOUT_MS, () => req.destroy(new Error('request timed out')));
      req.on('error', (e) => resolve({ ok: false, error: e.message }));
      req.end(body);
    });

  const latencies = new Samples();
  const deltas = new Samples();
  let errors = 0;
  let firstError: string | undefined;
  const record = (o: Outcome) => {
    if (o.ok) {
      latencies.push(o.ms);
      deltas.push(o.deltaMs);
    } else {
      errors++;
      firstError ??= o.error;
    }
  };

  try {
    if (job.kind === 'list') {
      let next = 0;
      const cpu0 = process.cpuUsage();
      const t0 = performance.now();
      await Promise.all(
        Array.from({ length: Math.min(job.connections, job.bodies.length) }, async () => {
          while (next < job.bodies.length) record(await once(job.bodies[next++]!));
        }),
      );
      const elapsedMs = performance.now() - t0;
      const cpu = process.cpuUsage(cpu0);
      return {
        requests: latencies.length,
        errors,
        firstError,
        elapsedMs,
        latenciesMs: latencies.toArray(),
        firstDeltaMs: deltas.toArray(),
        clientCpuCores: (cpu.user + cpu.system) / 1000 / elapsedMs,
        socketsOpened,
      };
    }

    if (job.durationMs <= 0) throw new Error('durationMs must be positive');
    const body = job.bodies[0]!;
    let measuring = false;
    let stopped = false;
    let windowStart = 0;
    let windowEnd = Infinity;
    let cpuAtStart = process.cpuUsage();
    const loop = async () => {
      while (!stopped) {
        const o = await once(body);
        if (measuring && performance.now() <= windowEnd) record(o);
        if (!o.ok) await new Promise((r) => setTimeout(r, 10));
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
    await Promise.all(loops);
    for (const t of timers) clearTimeout(t);
    const elapsedMs = windowEnd - windowStart;
    return {
      requests: latencies.length,
      errors,
      firstError,
      elapsedMs,
      latenciesMs: latencies.toArray(),
      firstDeltaMs: deltas.toArray(),
      clientCpuCores: (cpu.user + cpu.system) / 1000 / elapsedMs,
      socketsOpened,
    };
  } finally {
    agent.destroy();
  }
}

type LoadWorker = JobWorker<LoadJob, LoadResult>;

/** Forks this file as the generator (see job-worker.ts); jobs run one at a time. */
function forkChatLoadWorker(): LoadWorker {
  return forkJobWorker(import.meta.url, { [CHILD_ENV]: '1' }, (job: LoadJob) =>
    job.kind === 'timed' ? job.warmupMs + job.durationMs + REQUEST_TIMEOUT_MS + 20_000 : job.bodies.length * 2_000 + 30_000,
  );
}

// =====================================================================================================
// The benchmark
// =====================================================================================================

function intEnv(name: string, fallback: number, min: number, max: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min || value > max) throw new Error(`${name} must be an integer in ${min}..${max}, got ${raw}`);
  return value;
}

const log = (message: string) => process.stderr.write(`[bench:chat] ${message}\n`);
/** One JSON line per figure on stdout, with the host's load at that moment. */
const emit = (line: Record<string, unknown>) => process.stdout.write(`${JSON.stringify({ ...line, ...hostLoad() })}\n`);
const round = (v: number, digits: number) => (Number.isFinite(v) ? Math.round(v * 10 ** digits) / 10 ** digits : null);
/** The machine's 1-minute load average against its core count: other work on the host shows up in every latency here. */
const hostLoad = () => ({ host_loadavg_1m: round(loadavg()[0]!, 2), host_cpus: availableParallelism() });

const TARGET_ADDED_P50_MS = 2;
const TARGET_ADDED_TTFB_MS = 3;
const MESSAGE = 'What is the refund policy for annual plans, and how long does a refund take?';
const KB_WARMUP_QUERIES = 20;
/** Seconds of BENCH_TIMEOUT_S kept for the processing tail and the knowledge-base queries: uploads stop when they would eat into it. */
const KB_RESERVE_S = 200;
/** Never fewer documents than this when the time budget stops the uploads. */
const KB_MIN_DOCS = 1000;
const UPSTREAM_KEY = 'sk-bench-upstream-key';

type ConnectorType = 'flow' | 'openai' | 'messages' | 'generation' | 'generic';

/** Each type with the mock route of its own wire format, and how its upstream stream is recognised. */
const TYPES: Array<{
  type: ConnectorType;
  path: string;
  /** First text delta of the upstream's own stream (the event our first delta is made from). */
  upstreamFirstDelta?: string;
  /** The upstream stream is complete. */
  upstreamStreamEnd?: string;
}> = [
  {
    type: 'flow',
    path: '/api/v1/run/bench-flow',
    upstreamFirstDelta: String.raw`"event":"token","data":\{"chunk":"[^"]`,
    upstreamStreamEnd: '"event":"end"',
  },
  { type: 'openai', path: '/v1/chat/completions', upstreamFirstDelta: String.raw`"delta":\{"content":"[^"]`, upstreamStreamEnd: String.raw`data: \[DONE\]` },
  {
    type: 'messages',
    path: '/v1/messages',
    upstreamFirstDelta: '"type":"text_delta","text":"[^"]',
    upstreamStreamEnd: '"type":"message_stop"',
  },
  {
    type: 'generation',
    path: '/v1beta/models/gemini-2.5-flash:generateContent',
    upstreamFirstDelta: String.raw`"parts":\[\{"text":"[^"]`,
    upstreamStreamEnd: '"finishReason":"STOP"',
  },
  { type: 'generic', path: '/generic' },
];

/** BENCH_TYPES: which connector types, in this order (default all, as listed above). */
const SELECTED_TYPES = (process.env.BENCH_TYPES || TYPES.map((t) => t.type).join(',')).split(',').map(
  (name) =>
    TYPES.find((t) => t.type === name.trim()) ??
    (() => {
      throw new Error(`BENCH_TYPES: unknown type ${name}`);
    })(),
);

const OURS_FIRST_DELTA = String.raw`data: \{"type":"delta"`;
const OURS_STREAM_END = String.raw`"type":"complete"[\s\S]*data: \[DONE\]`;

const DURATION_MS = intEnv('BENCH_DURATION_MS', 3_000, 500, 60_000);
const WARMUP_MS = intEnv('BENCH_WARMUP_MS', 500, 0, 10_000);
const SERVICE_WARMUP_MS = intEnv('BENCH_SERVICE_WARMUP_MS', 2_000, 0, 60_000);
const ROUNDS = intEnv('BENCH_ROUNDS', 2, 1, 6);
const CONNECTIONS = intEnv('BENCH_CONNECTIONS', 1, 1, 64);
const PROFILE_ITERATIONS = intEnv('BENCH_PROFILE_ITERATIONS', 300, 50, 20_000);
const KB_DOCS = intEnv('BENCH_KB_DOCS', 0, 0, 1_000_000);
const UPLOAD_CONCURRENCY = intEnv('BENCH_UPLOAD_CONCURRENCY', 8, 1, 64);
const JOB_CONCURRENCY = intEnv('BENCH_JOB_CONCURRENCY', 4, 1, 32);
const TIMEOUT_S = intEnv('BENCH_TIMEOUT_S', 570, 60, 3600);
const PHASES = new Set((process.env.BENCH_PHASES || 'latency,stream,profile,kb').split(',').map((p) => p.trim()));
for (const p of PHASES) if (!['latency', 'stream', 'profile', 'kb'].includes(p)) throw new Error(`BENCH_PHASES: unknown phase ${p}`);
const SCIFACT_DIR = process.env.BENCH_SCIFACT_DIR || join(fileURLToPath(new URL('../../', import.meta.url)), '..', 'shared', 'datasets', 'scifact');

// ---- statistics ----------------------------------------------------------------------------------------

function percentileOf(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return NaN;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))]!;
}

function summary(arrays: Float64Array[]) {
  const all = new Float64Array(arrays.reduce((n, a) => n + a.length, 0));
  let offset = 0;
  for (const a of arrays) {
    all.set(a, offset);
    offset += a.length;
  }
  all.sort();
  const mean = all.reduce((s, v) => s + v, 0) / Math.max(1, all.length);
  return { count: all.length, p50: percentileOf(all, 50), p90: percentileOf(all, 90), p99: percentileOf(all, 99), mean };
}

interface Aggregate {
  requests: number;
  errors: number;
  firstError?: string;
  elapsedMs: number;
  clientCpuMs: number;
  latencies: Float64Array[];
  firstDeltas: Float64Array[];
}

/**
 * With BENCH_CPU_PROFILE, runs `fn` under the V8 sampling profiler of this process; the samples of every
 * call with the same `file` are written together (profiling restarts per call, so only these windows count).
 */
const CPU_PROFILE_DIR = process.env.BENCH_CPU_PROFILE || '';
const cpuProfiles = new Map<string, CpuProfile>();
async function profiled<T>(file: string | undefined, fn: () => Promise<T>): Promise<T> {
  if (!CPU_PROFILE_DIR || !file) return fn();
  const { startCpuProfile } = await import('./bench-kit.ts');
  const profiler = await startCpuProfile();
  try {
    return await fn();
  } finally {
    const profile = await profiler.stop();
    // Node ids differ between profiles, so windows are kept apart by offsetting the later ones' ids.
    const merged = cpuProfiles.get(file);
    if (!merged) cpuProfiles.set(file, profile);
    else {
      const offset = Math.max(...merged.nodes.map((n) => n.id));
      for (const n of profile.nodes) merged.nodes.push({ ...n, id: n.id + offset, children: n.children?.map((c) => c + offset) });
      merged.samples.push(...profile.samples.map((id) => id + offset));
      merged.timeDeltas.push(...profile.timeDeltas);
      merged.endTime = profile.endTime;
    }
    writeFileSync(join(CPU_PROFILE_DIR, file), JSON.stringify(cpuProfiles.get(file)));
  }
}

/** Runs the named jobs in `rounds` alternating rounds (order reversed every other round), each for duration / rounds. */
async function measureAlternating(worker: LoadWorker, label: string, jobs: Array<[string, LoadJob]>): Promise<Map<string, Aggregate>> {
  const out = new Map<string, Aggregate>();
  for (let r = 0; r < ROUNDS; r++) {
    const order = r % 2 === 0 ? jobs : [...jobs].reverse();
    for (const [name, job] of order) {
      const profileFile = name === 'ours' ? `chat-${label}.cpuprofile` : undefined;
      const result = await profiled(profileFile, () =>
        worker.run({ ...job, durationMs: Math.max(100, Math.round(DURATION_MS / ROUNDS)), warmupMs: WARMUP_MS }),
      );
      const s = summary([result.latenciesMs]);
      const d = job.firstDelta ? summary([result.firstDeltaMs]) : undefined;
      log(
        `  ${label} -> ${name} (round ${r + 1}/${ROUNDS}): ${result.requests} ok, p50 ${s.p50.toFixed(3)} ms, p99 ${s.p99.toFixed(3)} ms` +
          `${d ? `, first delta p50 ${d.p50.toFixed(3)} ms` : ''}, errors ${result.errors}${result.firstError ? ` (${result.firstError})` : ''}, sockets ${result.socketsOpened}`,
      );
      if (result.requests === 0) throw new Error(`${label} -> ${name}: no successful request (${result.firstError ?? 'no error recorded'})`);
      const a = out.get(name) ?? { requests: 0, errors: 0, elapsedMs: 0, clientCpuMs: 0, latencies: [], firstDeltas: [] };
      a.requests += result.requests;
      a.errors += result.errors;
      a.firstError ??= result.firstError;
      a.elapsedMs += result.elapsedMs;
      a.clientCpuMs += result.clientCpuCores * result.elapsedMs;
      a.latencies.push(result.latenciesMs);
      a.firstDeltas.push(result.firstDeltaMs);
      out.set(name, a);
    }
  }
  return out;
}

// ---- bare echo servers (TLS cost) ------------------------------------------------------------------------

async function listen(server: HttpServer): Promise<number> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  return (server.address() as AddressInfo).port;
}

async function closeServer(server: HttpServer) {
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  server.closeAllConnections();
  await closed;
}

/** node:http and node:https servers that read the request body and answer `body` (the service's TLS certificate). */
async function startEchoServers(reply: { contentType: string; body: Buffer }, tls: { cert: string; key: string }) {
  const serverOptions = { keepAliveTimeout: 5_000, headersTimeout: 20_000, requestTimeout: 120_000 };
  const handler = (req: IncomingMessage, res: ServerResponse) => {
    req.on('data', () => {});
    req.on('end', () => {
      res.writeHead(200, { 'Content-Type': reply.contentType, 'Content-Length': reply.body.byteLength });
      res.end(reply.body);
    });
  };
  const http = createHttpServer(serverOptions, handler);
  const https = createHttpsServer({ ...serverOptions, cert: tls.cert, key: tls.key, minVersion: 'TLSv1.2' }, handler);
  const httpPort = await listen(http);
  const httpsPort = await listen(https);
  return {
    httpOrigin: `http://127.0.0.1:${httpPort}`,
    httpsOrigin: `https://127.0.0.1:${httpsPort}`,
    close: async () => {
      await Promise.all([closeServer(http), closeServer(https)]);
    },
  };
}

// ---- database statement counter ---------------------------------------------------------------------------

type DbStats = { statements: number; ms: number; byKind: Map<string, { n: number; ms: number }> };

/**
 * Wraps executeQuery of the driver's connection class (every statement, transactions included, goes through
 * it) while `fn` runs. Statements on the jobs table (the idle job workers' polling) are left out.
 */
async function countStatements(db: import('kysely').Kysely<any>, fn: (stats: DbStats) => Promise<void>): Promise<DbStats> {
  let proto: { executeQuery: (...args: any[]) => Promise<unknown> } | undefined;
  await db.getExecutor().provideConnection(async (conn) => {
    proto = Object.getPrototypeOf(conn) as typeof proto;
  });
  if (!proto || typeof proto.executeQuery !== 'function') throw new Error('cannot find the driver connection to count statements');
  const stats: DbStats = { statements: 0, ms: 0, byKind: new Map() };
  const original = proto.executeQuery;
  proto.executeQuery = async function (this: unknown, ...args: any[]) {
    const sqlText = String((args[0] as { sql?: string })?.sql ?? '');
    const t0 = performance.now();
    try {
      return await original.apply(this, args);
    } finally {
      if (!/\bjobs\b/.test(sqlText)) {
        const ms = performance.now() - t0;
        const table = /\b(?:from|into|update)\s+"?(\w+)"?/i.exec(sqlText)?.[1];
        const kind = `${sqlText.trim().split(/\s+/)[0]!.toLowerCase()}${table ? ` ${table}` : ''}`;
        const entry = stats.byKind.get(kind) ?? { n: 0, ms: 0 };
        entry.n++;
        entry.ms += ms;
        stats.byKind.set(kind, entry);
        stats.statements++;
        stats.ms += ms;
      }
    }
  };
  try {
    await fn(stats);
  } finally {
    proto.executeQuery = original;
  }
  return stats;
}

// ---- SciFact ------------------------------------------------------------------------------------------------

function readJsonl(path: string): any[] {
  return readFileSync(path, 'utf8')
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => JSON.parse(line));
}

function loadScifact() {
  for (const file of ['corpus.jsonl', 'queries.jsonl', 'qrels/test.tsv']) {
    if (!existsSync(join(SCIFACT_DIR, file))) throw new Error(`SciFact not found: ${join(SCIFACT_DIR, file)} is missing (set BENCH_SCIFACT_DIR)`);
  }
  const judged = new Set<string>();
  const queryIds: string[] = [];
  for (const line of readFileSync(join(SCIFACT_DIR, 'qrels/test.tsv'), 'utf8').split('\n').slice(1)) {
    const [queryId, corpusId, score] = line.trim().split('\t');
    if (!queryId || !corpusId || !(Number(score) > 0)) continue;
    if (!queryIds.includes(queryId)) queryIds.push(queryId);
    judged.add(corpusId);
  }
  const allQueries = new Map(readJsonl(join(SCIFACT_DIR, 'queries.jsonl')).map((q) => [String(q._id), String(q.text)]));
  const queries = queryIds.map((id) => {
    const text = allQueries.get(id);
    if (text === undefined) throw new Error(`query ${id} of the qrels is not in queries.jsonl`);
    return { id, text };
  });
  let corpus = readJsonl(join(SCIFACT_DIR, 'corpus.jsonl')).map((d) => ({ id: String(d._id), text: `${String(d.title ?? '')}\n\n${String(d.text ?? '')}` }));
  const fullSize = corpus.length;
  const subset = KB_DOCS > 0 && KB_DOCS < corpus.length;
  if (subset) {
    const others = Math.max(0, KB_DOCS - judged.size);
    let taken = 0;
    corpus = corpus.filter((d) => judged.has(d.id) || taken++ < others);
  }
  // Judged documents first: a run the time budget cuts short still holds every relevant abstract.
  corpus = [...corpus.filter((d) => judged.has(d.id)), ...corpus.filter((d) => !judged.has(d.id))];
  return { corpus, queries, subset, fullSize };
}

// ---- main ---------------------------------------------------------------------------------------------------

async function main() {
  const started = performance.now();
  const deadline = Date.now() + TIMEOUT_S * 1000;
  const kit = await import('./bench-kit.ts');
  const { startProviderMockProcess } = await import('./provider-mock-process.ts');
  const { loadTlsMaterial } = await import('../../server/tls.ts');
  const { createContext } = await import('../../server/dispatch.ts');
  const { appRouter } = await import('../../routers/app-router.ts');
  const { resolveCaller } = await import('../../routers/auth/caller.ts');
  const { sha256Hex } = await import('../../adapters/outbound/secrets.ts');
  const { findActiveKeyByHash } = await import('../../routers/api-keys/repository.ts');
  const chatRepo = await import('../../routers/chat/repository.ts');
  const { callEndpoint } = await import('../../adapters/outbound/ai/connector/connector.ts');
  const { answerQuery } = await import('../../routers/knowledge-base/answer.ts');
  const { findConfigById } = await import('../../routers/knowledge-base/repository.ts');

  let service: BenchService | undefined;
  let mock: ProviderMockProcess | undefined;
  const watchdog = kit.startWatchdog(TIMEOUT_S, log, async () => service?.cleanup());

  try {
    mock = await startProviderMockProcess();
    log(`provider mock on ${mock.url}`);
    service = await kit.startBenchService(log, {
      OUTBOUND_ALLOW_HOSTS: `127.0.0.1:${mock.port}`,
      RATE_LIMIT_CHAT: '100000000',
      JOB_CONCURRENCY: String(JOB_CONCURRENCY),
    });
    const { app } = service;
    const deps = app.deps;
    const origin = new URL(app.url).origin;
    const database = service.databaseKind;
    log(`service on ${app.url} (${database})`);
    const worker = forkChatLoadWorker();
    service.onCleanup('stop the load generator', () => worker.close());

    const signUp = await kit.expectStatus(
      kit.call(origin, 'POST', '/api/v1/auth/sign-up', { body: { email: `chatbench-${Date.now()}@example.com`, password: 'correct horse battery staple' } }),
      201,
      'sign-up',
    );
    const token = signUp.json.data.token as string;

    const createInterface = async (body: Record<string, unknown>) => {
      const ci = await kit.expectStatus(kit.call(origin, 'POST', '/api/v1/chat-interfaces', { token, body }), 201, 'create chat interface');
      const iface = ci.json.data.chatInterface as { id: string; slug: string };
      const key = await kit.expectStatus(
        kit.call(origin, 'POST', '/api/v1/api-keys', { token, body: { name: `bench ${body.name as string}`, chatInterfaceId: iface.id } }),
        201,
        'create API key',
      );
      return { id: iface.id, slug: iface.slug, key: key.json.data.key as string };
    };

    const oursHeaders = (key: string, stream: boolean): Record<string, string> => ({
      authorization: `Bearer ${key}`,
      'content-type': 'application/json',
      accept: stream ? 'text/event-stream' : 'application/json',
    });
    const chatBody = JSON.stringify({ message: MESSAGE });
    /** The upstream request the service sent, replayed as is (hop-by-hop and framing headers left to the client). */
    const directJob = (record: ProviderMockRequest, extra: Partial<LoadJob>): LoadJob => {
      const headers: Record<string, string> = {};
      for (const [name, value] of Object.entries(record.headers)) {
        if (['host', 'content-length', 'connection', 'transfer-encoding', 'keep-alive'].includes(name) || value === undefined) continue;
        headers[name] = Array.isArray(value) ? value.join(', ') : value;
      }
      return {
        kind: 'timed',
        origin: mock!.url,
        path: record.url,
        headers,
        bodies: [typeof record.body === 'string' ? record.body : JSON.stringify(record.body)],
        connections: CONNECTIONS,
        warmupMs: WARMUP_MS,
        durationMs: DURATION_MS,
        expectStatus: 200,
        ...extra,
      };
    };

    // ---- one interface per connector type; capture the upstream requests ---------------------------------
    const perType: Array<{
      spec: (typeof TYPES)[number];
      iface: { id: string; slug: string; key: string };
      ours: LoadJob;
      direct: LoadJob;
      oursStream?: LoadJob;
      directStream?: LoadJob;
      oursReply: Buffer;
    }> = [];
    for (const spec of SELECTED_TYPES) {
      const iface = await createInterface({
        name: `bench ${spec.type}`,
        endpointUrl: `${mock.url}${spec.path}`,
        apiKey: UPSTREAM_KEY,
        endpointType: spec.type,
      });
      const chatPath = `/api/v1/chat/${iface.slug}`;
      await mock.reset();
      const first = await kit.expectStatus(
        kit.call(origin, 'POST', chatPath, { rawBody: Buffer.from(chatBody), headers: oursHeaders(iface.key, false) }),
        200,
        `chat (${spec.type})`,
      );
      if (first.json?.message !== `Echo: ${MESSAGE}`) throw new Error(`chat (${spec.type}): unexpected reply ${first.text.slice(0, 300)}`);
      const sentRequests = await mock.requests();
      const sent = sentRequests.at(-1);
      if (!sent || sentRequests.length !== 1) throw new Error(`chat (${spec.type}): expected one upstream request, saw ${sentRequests.length}`);
      const ours: LoadJob = {
        kind: 'timed',
        origin,
        path: chatPath,
        headers: oursHeaders(iface.key, false),
        bodies: [chatBody],
        connections: CONNECTIONS,
        warmupMs: WARMUP_MS,
        durationMs: DURATION_MS,
        expectStatus: 200,
        expectBody: '"message":"Echo: ',
      };
      const entry: (typeof perType)[number] = {
        spec,
        iface,
        ours,
        direct: directJob(sent, { expectBody: 'Echo: ' }),
        oursReply: Buffer.from(first.text, 'utf8'),
      };
      if (spec.upstreamFirstDelta) {
        await mock.reset();
        const streamed = await kit.expectStatus(
          kit.call(origin, 'POST', chatPath, { rawBody: Buffer.from(chatBody), headers: oursHeaders(iface.key, true) }),
          200,
          `streamed chat (${spec.type})`,
        );
        if (!new RegExp(OURS_STREAM_END).test(streamed.text) || !new RegExp(OURS_FIRST_DELTA).test(streamed.text))
          throw new Error(`streamed chat (${spec.type}): unexpected stream ${streamed.text.slice(0, 300)}`);
        const sentStream = (await mock.requests()).at(-1);
        if (!sentStream) throw new Error(`streamed chat (${spec.type}): no upstream request`);
        entry.oursStream = { ...ours, headers: oursHeaders(iface.key, true), expectBody: OURS_STREAM_END, firstDelta: OURS_FIRST_DELTA };
        entry.directStream = directJob(sentStream, { expectBody: spec.upstreamStreamEnd, firstDelta: spec.upstreamFirstDelta });
        log(`${spec.type}: upstream ${sent.method} ${sent.url}; streamed: ${sentStream.url}`);
      } else {
        log(`${spec.type}: upstream ${sent.method} ${sent.url}`);
      }
      perType.push(entry);
    }
    await mock.reset();

    const common = { bench: 'chat', route: 'POST /api/v1/chat/{slug}', database, connections: CONNECTIONS, rounds: ROUNDS, duration_ms: DURATION_MS };

    // ---- 1. latency per type, and the TLS echo baselines ---------------------------------------------
    if (PHASES.has('latency')) {
      const tlsMaterial = await loadTlsMaterial({ certPath: deps.config.TLS_CERT, keyPath: deps.config.TLS_KEY, dataDir: service.dataDir });
      const openai = perType.find((p) => p.spec.type === 'openai')!;
      const echo = await startEchoServers({ contentType: 'application/json', body: openai.oursReply }, tlsMaterial);
      service.onCleanup('close the echo servers', echo.close);
      log(`bare echo servers (${openai.oursReply.byteLength} response bytes, the openai-type chat reply)`);
      const echoJob = (o: string): LoadJob => ({ ...openai.ours, origin: o, expectBody: '"message":"Echo: ' });
      const echoAgg = await measureAlternating(worker, 'echo', [
        ['node:https', echoJob(echo.httpsOrigin)],
        ['node:http', echoJob(echo.httpOrigin)],
      ]);
      const httpsEcho = summary(echoAgg.get('node:https')!.latencies);
      const httpEcho = summary(echoAgg.get('node:http')!.latencies);
      const tlsCostP50 = httpsEcho.p50 - httpEcho.p50;
      for (const [metric, key] of [
        ['echo_p50_ms', 'p50'],
        ['echo_p99_ms', 'p99'],
      ] as const) {
        emit({
          bench: 'chat',
          route: 'bare echo of a chat reply (same request and response bytes)',
          metric,
          value: round(httpsEcho[key], 3),
          baseline: 'node:http echo',
          baseline_value: round(httpEcho[key], 3),
          added_ms: round(httpsEcho[key] - httpEcho[key], 3),
          added_definition: 'node:https - node:http: the cost of TLS on a keep-alive connection',
          requests: httpsEcho.count,
          baseline_requests: httpEcho.count,
          connections: CONNECTIONS,
          rounds: ROUNDS,
          duration_ms: DURATION_MS,
        });
      }

      // Steady state: V8 compiles the chat path and tiers PGlite's WebAssembly up over the first seconds of
      // load; without this the first type measured paid for it (1-2 ms more at p50 than in its second round).
      if (SERVICE_WARMUP_MS > 0) for (const t of perType) await worker.run({ ...t.ours, warmupMs: 0, durationMs: SERVICE_WARMUP_MS });
      log(`service warmed up: each type's chat for ${SERVICE_WARMUP_MS} ms`);
      for (const t of perType) {
        const agg = await measureAlternating(worker, t.spec.type, [
          ['ours', t.ours],
          ['direct', t.direct],
        ]);
        const ours = agg.get('ours')!;
        const direct = agg.get('direct')!;
        const o = summary(ours.latencies);
        const d = summary(direct.latencies);
        for (const [metric, key] of [
          ['p50_ms', 'p50'],
          ['p99_ms', 'p99'],
        ] as const) {
          const added = o[key] - d[key];
          emit({
            ...common,
            type: t.spec.type,
            upstream: `POST ${t.direct.path}`,
            metric,
            value: round(o[key], 3),
            baseline: 'upstream-direct',
            baseline_definition: 'the same upstream request sent straight to the mock over plain HTTP by the same generator',
            baseline_value: round(d[key], 3),
            added_ms: round(added, 3),
            ...(key === 'p50'
              ? {
                  target_ms: TARGET_ADDED_P50_MS,
                  meets_target: added <= TARGET_ADDED_P50_MS,
                  tls_cost_p50_ms: round(tlsCostP50, 3),
                  added_excluding_tls_ms: round(added - tlsCostP50, 3),
                  https_echo_p50_ms: round(httpsEcho.p50, 3),
                }
              : {}),
            mean_ms: round(o.mean, 3),
            baseline_mean_ms: round(d.mean, 3),
            requests: ours.requests,
            errors: ours.errors,
            baseline_requests: direct.requests,
            baseline_errors: direct.errors,
            client_cpu_cores: round(ours.clientCpuMs / ours.elapsedMs, 2),
          });
        }
      }
    }

    // ---- 2. streaming time to first delta ---------------------------------------------------------------
    if (PHASES.has('stream')) {
      for (const t of perType) {
        if (!t.oursStream || !t.directStream) continue;
        const agg = await measureAlternating(worker, `${t.spec.type} stream`, [
          ['ours', t.oursStream],
          ['direct', t.directStream],
        ]);
        const ours = agg.get('ours')!;
        const direct = agg.get('direct')!;
        const o = summary(ours.firstDeltas);
        const d = summary(direct.firstDeltas);
        const oTotal = summary(ours.latencies);
        const dTotal = summary(direct.latencies);
        for (const [metric, key] of [
          ['ttfb_p50_ms', 'p50'],
          ['ttfb_p99_ms', 'p99'],
        ] as const) {
          const added = o[key] - d[key];
          emit({
            ...common,
            route: 'POST /api/v1/chat/{slug} (Accept: text/event-stream)',
            type: t.spec.type,
            upstream: `POST ${t.directStream.path}`,
            metric,
            value: round(o[key], 3),
            definition:
              'request start -> first response chunk holding the first text delta (ours: data: {"type":"delta"; upstream: its first text-delta event)',
            baseline: 'upstream-direct-stream',
            baseline_value: round(d[key], 3),
            added_ms: round(added, 3),
            ...(key === 'p50' ? { target_ms: TARGET_ADDED_TTFB_MS, meets_target: added <= TARGET_ADDED_TTFB_MS } : {}),
            stream_total_ms: round(oTotal[key], 3),
            baseline_stream_total_ms: round(dTotal[key], 3),
            requests: ours.requests,
            errors: ours.errors,
            baseline_requests: direct.requests,
            baseline_errors: direct.errors,
            note: 'the mock waits ~2 ms between stream events, before the first text delta too for flow (2 events) and messages (3 events); both sides wait the same',
          });
        }
      }
    }

    // ---- profile: where the added time of one chat goes ------------------------------------------------------
    if (PHASES.has('profile')) {
      const openai = perType.find((p) => p.spec.type === 'openai')!;
      const db = deps.database.db;
      const authorization = `Bearer ${openai.iface.key}`;
      const caller = await resolveCaller(deps, authorization);
      if (caller.kind !== 'apiKey') throw new Error('the API key did not resolve');
      const iface = await chatRepo.findInterfaceBySlug(db, openai.iface.slug);
      if (!iface) throw new Error('interface not found');
      const upstreamRecord = { url: openai.direct.path, headers: openai.direct.headers, body: openai.direct.bodies[0]! };
      const keepAlive = new HttpAgent({ keepAlive: true, maxSockets: 1 });
      const postUpstream = (agent: HttpAgent | false) =>
        new Promise<void>((resolve, reject) => {
          const req = httpRequest(
            {
              host: '127.0.0.1',
              port: mock!.port,
              path: upstreamRecord.url,
              method: 'POST',
              headers: { ...upstreamRecord.headers, 'content-length': String(Buffer.byteLength(upstreamRecord.body)) },
              agent,
            },
            (res) => {
              res.resume();
              res.on('end', () => (res.statusCode === 200 ? resolve() : reject(new Error(`upstream ${res.statusCode}`))));
              res.on('error', reject);
            },
          );
          req.on('error', reject);
          req.end(upstreamRecord.body);
        });
      const fakeReq = { headers: { authorization, accept: 'application/json' } } as unknown as IncomingMessage;
      const connectorRequest = () => ({
        endpointUrl: iface.endpoint_url!,
        apiKey: UPSTREAM_KEY,
        type: 'openai' as const,
        message: MESSAGE,
        sessionId: chatRepo.newSessionId(),
        history: [],
        timeoutMs: deps.config.OUTBOUND_TIMEOUT_MS,
      });
      const parts: Array<[string, () => Promise<unknown> | unknown]> = [
        [
          'full chat over HTTPS (in-process client, 1 keep-alive connection, sequential)',
          async () => {
            const r = await kit.call(origin, 'POST', `/api/v1/chat/${openai.iface.slug}`, {
              rawBody: Buffer.from(chatBody),
              headers: oursHeaders(openai.iface.key, false),
            });
            if (r.status !== 200) throw new Error(`chat ${r.status}`);
          },
        ],
        [
          'chat.send through appRouter.createCaller (no HTTP, TLS, REST glue)',
          () =>
            appRouter.createCaller(createContext(deps, fakeReq, 'bench-profile-request', '127.0.0.1')).chat.send({ slug: openai.iface.slug, message: MESSAGE }),
        ],
        ['resolveCaller: the API key from the per-instance cache (sha256 + a map)', () => resolveCaller(deps, authorization)],
        ['the API key lookup a cache miss makes (find_active_api_key, 1 select)', () => findActiveKeyByHash(db, sha256Hex(openai.iface.key))],
        [
          'rateLimiter.hit (memory limiter)',
          () => deps.rateLimiter.hit(`chat:chat.send:k:${caller.keyId}`, deps.config.RATE_LIMIT_CHAT, deps.config.RATE_LIMIT_WINDOW_SECONDS * 1000),
        ],
        ['findInterfaceBySlug (1 select)', () => chatRepo.findInterfaceBySlug(db, openai.iface.slug)],
        [
          'recordExchange, new session (the turn: session, 2 messages, rollups, outbox probe; 1 statement)',
          () =>
            chatRepo.recordExchange(
              db,
              { id: chatRepo.newSessionId(), chatInterfaceId: iface.id, ownerId: iface.owner_id, isNew: true },
              {
                message: MESSAGE,
                reply: `Echo: ${MESSAGE}`,
                sources: [],
                usage: { promptTokens: 20, completionTokens: 20, totalTokens: 40 },
                toolCalls: [],
                activity: { metrics: { conversations: 1, messages: 1, replies: 1, upstream_calls: 1, latency_b3: 1 }, visitor: 's:bench' },
              },
            ),
        ],
        ['callEndpoint openai (guarded client on a pooled keep-alive connection, build body, parse reply)', () => callEndpoint(deps.http, connectorRequest())],
        ['same upstream POST, bare node:http keep-alive (the upstream-direct baseline, in-process)', () => postUpstream(keepAlive)],
        ['same upstream POST, bare node:http new connection per request', () => postUpstream(false)],
      ];
      const measured: Array<{ part: string; p50Us: number; meanUs: number; cpuUs: number }> = [];
      try {
        for (const [part, fn] of parts) {
          const warm = Math.min(100, Math.ceil(PROFILE_ITERATIONS / 3));
          for (let i = 0; i < warm; i++) await fn();
          const calls = new Float64Array(PROFILE_ITERATIONS);
          const cpu0 = process.cpuUsage();
          for (let i = 0; i < PROFILE_ITERATIONS; i++) {
            const t = performance.now();
            await fn();
            calls[i] = performance.now() - t;
          }
          const cpu = process.cpuUsage(cpu0);
          const s = summary([calls]);
          measured.push({ part, p50Us: s.p50 * 1000, meanUs: s.mean * 1000, cpuUs: (cpu.user + cpu.system) / PROFILE_ITERATIONS });
          log(`profile: ${part}: p50 ${(s.p50 * 1000).toFixed(1)} us, mean ${(s.mean * 1000).toFixed(1)} us`);
        }
      } finally {
        keepAlive.destroy();
      }
      const full = measured[0]!.p50Us;
      for (const m of measured) {
        emit({
          bench: 'chat-profile',
          type: 'openai',
          part: m.part,
          metric: 'p50_us_per_call',
          value: round(m.p50Us, 1),
          mean_us_per_call: round(m.meanUs, 1),
          cpu_us_per_call: round(m.cpuUs, 1),
          calls: PROFILE_ITERATIONS,
          share_of_full_chat_p50: round(m.p50Us / full, 4),
          database,
          note: 'sequential in-process timings, one call at a time; the upstream mock runs in its own process',
        });
      }

      // Statements per chat, counted at the driver over sequential chats through HTTPS.
      const chats = Math.min(200, PROFILE_ITERATIONS);
      const t0 = performance.now();
      const chatWall = new Float64Array(chats);
      const chatDb = new Float64Array(chats);
      const stats = await countStatements(db, async (current) => {
        for (let i = 0; i < chats; i++) {
          const dbBefore = current.ms;
          const t = performance.now();
          const r = await kit.call(origin, 'POST', `/api/v1/chat/${openai.iface.slug}`, {
            rawBody: Buffer.from(chatBody),
            headers: oursHeaders(openai.iface.key, false),
          });
          chatWall[i] = performance.now() - t;
          chatDb[i] = current.ms - dbBefore;
          if (r.status !== 200) throw new Error(`chat ${r.status}`);
        }
      });
      const perChatMs = (performance.now() - t0) / chats;
      const wallSummary = summary([chatWall]);
      const dbSummary = summary([chatDb]);
      const byKind = Object.fromEntries(
        [...stats.byKind.entries()]
          .sort((a, b) => b[1].ms - a[1].ms)
          .map(([k, v]) => [k, { per_chat: round(v.n / chats, 2), ms_per_chat: round(v.ms / chats, 3) }]),
      );
      emit({
        bench: 'chat-profile',
        type: 'openai',
        metric: 'db_statements_per_chat',
        value: round(stats.statements / chats, 2),
        db_ms_per_chat_mean: round(stats.ms / chats, 3),
        db_ms_per_chat_p50: round(dbSummary.p50, 3),
        chat_ms_mean: round(perChatMs, 3),
        chat_ms_p50: round(wallSummary.p50, 3),
        db_share_of_chat_p50: round(dbSummary.p50 / wallSummary.p50, 4),
        by_statement: byKind,
        chats,
        database,
        note: 'wall time inside the driver executeQuery (begin/commit included); job-queue polling excluded; new session per chat; chats over HTTPS from an in-process client',
      });
      log(`db: ${(stats.statements / chats).toFixed(2)} statements, ${(stats.ms / chats).toFixed(3)} ms per chat of ${perChatMs.toFixed(3)} ms`);
    }

    // ---- 3. knowledge-base chat on SciFact ------------------------------------------------------------------
    if (PHASES.has('kb')) {
      const dataset = loadScifact();
      log(
        `SciFact: ${dataset.corpus.length} of ${dataset.fullSize} documents${dataset.subset ? ' (subset: the judged ones first)' : ''}, ${dataset.queries.length} test queries`,
      );
      const configId = await kit.createKnowledgeBase(origin, token, {
        name: 'SciFact chat',
        chunkSize: 8000,
        chunkOverlap: 0,
        language: 'en',
        embedding: { provider: 'local' },
      });
      const db = deps.database.db;
      const t0 = performance.now();
      let uploaded = 0;
      // Judged documents go first (loadScifact), so a run cut short still holds every relevant abstract.
      const uploadUntil = started + (TIMEOUT_S - KB_RESERVE_S) * 1000;
      let cutShort = false;
      const results = await kit.mapPool(dataset.corpus, UPLOAD_CONCURRENCY, async (doc) => {
        if (performance.now() > uploadUntil && uploaded >= KB_MIN_DOCS) {
          cutShort = true;
          return null;
        }
        const r = await kit.uploadDocument(origin, token, configId, `${doc.id}.txt`, 'text/plain', Buffer.from(doc.text, 'utf8'));
        if (++uploaded % 1000 === 0) log(`  uploaded ${uploaded}/${dataset.corpus.length} (${((performance.now() - t0) / 1000).toFixed(1)} s)`);
        return r;
      });
      if (cutShort)
        log(`  time budget: uploads stopped after ${uploaded} documents (BENCH_TIMEOUT_S ${TIMEOUT_S} s minus ${KB_RESERVE_S} s for processing and queries)`);
      const uploadSeconds = (performance.now() - t0) / 1000;
      log(`  uploads done in ${uploadSeconds.toFixed(1)} s; waiting for processing`);
      let counts: Record<string, number> = {};
      let lastLog = performance.now();
      for (;;) {
        const rows = await db
          .selectFrom('kb_documents')
          .select(['status'])
          .select((eb) => eb.fn.countAll<number>().as('n'))
          .where('config_id', '=', configId)
          .groupBy('status')
          .execute();
        counts = Object.fromEntries(rows.map((r) => [r.status, Number(r.n)]));
        if ((counts.processing ?? 0) === 0) break;
        if (performance.now() - lastLog > 10_000) {
          lastLog = performance.now();
          log(`  ${counts.completed ?? 0} completed, ${counts.processing ?? 0} processing (${((performance.now() - t0) / 1000).toFixed(0)} s)`);
        }
        if (Date.now() > deadline - 60_000)
          throw new Error(`ingestion did not finish in time (${counts.processing} documents still processing); set BENCH_KB_DOCS=1000`);
        await new Promise((r) => setTimeout(r, 250));
      }
      const ingestSeconds = (performance.now() - t0) / 1000;
      const kbCommon = {
        bench: 'chat',
        type: 'knowledge-base',
        dataset: 'scifact',
        corpus_docs: uploaded,
        corpus_docs_full: dataset.fullSize,
        subset: uploaded < dataset.fullSize,
        ...(uploaded < dataset.fullSize
          ? {
              subset_reason: cutShort
                ? `uploads stopped by the time budget after ${uploaded} documents (judged ones first)`
                : `BENCH_KB_DOCS=${KB_DOCS} (judged documents first)`,
            }
          : {}),
        database,
      };
      emit({
        ...kbCommon,
        metric: 'ingest_seconds',
        value: round(ingestSeconds, 2),
        upload_seconds: round(uploadSeconds, 2),
        docs_per_second: round((counts.completed ?? 0) / ingestSeconds, 2),
        completed: counts.completed ?? 0,
        failed: counts.failed ?? 0,
        duplicates: results.filter((r) => r?.duplicate).length,
        upload_concurrency: UPLOAD_CONCURRENCY,
        job_concurrency: JOB_CONCURRENCY,
        route: 'POST /api/v1/knowledge-base/documents (one .txt per abstract)',
      });
      log(`  ${counts.completed ?? 0} completed, ${counts.failed ?? 0} failed in ${ingestSeconds.toFixed(1)} s`);

      const kbIface = await createInterface({ name: 'bench scifact', configId });
      const config = await findConfigById(db, configId);
      if (!config) throw new Error('the knowledge base disappeared');
      const chatJob = (bodies: string[]): LoadJob => ({
        kind: 'list',
        origin,
        path: `/api/v1/chat/${kbIface.slug}`,
        headers: oursHeaders(kbIface.key, false),
        bodies,
        connections: 1,
        warmupMs: 0,
        durationMs: 0,
        expectStatus: 200,
        expectBody: '"message":"',
      });
      const kbQueryJob = (bodies: string[]): LoadJob => ({
        ...chatJob(bodies),
        path: '/api/v1/knowledge-base/query',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json' },
        expectBody: '"sources":',
      });
      const chatBodies = dataset.queries.map((q) => JSON.stringify({ message: q.text }));
      const kbBodies = dataset.queries.map((q) => JSON.stringify({ query: q.text, configId }));
      log(`knowledge-base chat: ${KB_WARMUP_QUERIES} warm-up queries each, then ${dataset.queries.length} queries sequentially per target`);
      await worker.run(chatJob(chatBodies.slice(0, KB_WARMUP_QUERIES)));
      await worker.run(kbQueryJob(kbBodies.slice(0, KB_WARMUP_QUERIES)));
      for (const q of dataset.queries.slice(0, KB_WARMUP_QUERIES)) await answerQuery(deps, config, q.text);

      // Per query, the three targets one after the other (order rotating), so host load drift hits all alike.
      const chatMs: number[] = [];
      const kbQueryMs: number[] = [];
      const inProcess: number[] = [];
      let sources = 0;
      const targets: Array<() => Promise<void>> = [];
      for (let i = 0; i < dataset.queries.length; i++) {
        const q = dataset.queries[i]!;
        targets.length = 0;
        targets.push(async () => {
          const r = await worker.run(chatJob([chatBodies[i]!]));
          if (r.errors > 0) throw new Error(`knowledge-base chat: ${r.firstError}`);
          chatMs.push(r.latenciesMs[0]!);
        });
        targets.push(async () => {
          const r = await worker.run(kbQueryJob([kbBodies[i]!]));
          if (r.errors > 0) throw new Error(`knowledge-base query: ${r.firstError}`);
          kbQueryMs.push(r.latenciesMs[0]!);
        });
        targets.push(async () => {
          const t = performance.now();
          const r = await answerQuery(deps, config, q.text);
          inProcess.push(performance.now() - t);
          sources += r.sources.length;
        });
        for (let j = 0; j < targets.length; j++) await targets[(i + j) % targets.length]!();
        if (Date.now() > deadline - 20_000) {
          log(`  time budget: stopping after ${i + 1} of ${dataset.queries.length} queries`);
          break;
        }
      }
      const c = summary([Float64Array.from(chatMs)]);
      const k = summary([Float64Array.from(kbQueryMs)]);
      const a = summary([Float64Array.from(inProcess)]);
      log(
        `  chat p50 ${c.p50.toFixed(2)} ms p99 ${c.p99.toFixed(2)} ms; kb query endpoint p50 ${k.p50.toFixed(2)} ms; answerQuery in-process p50 ${a.p50.toFixed(2)} ms`,
      );
      for (const [metric, key] of [
        ['p50_ms', 'p50'],
        ['p99_ms', 'p99'],
      ] as const) {
        emit({
          ...kbCommon,
          route: 'POST /api/v1/chat/{slug} (interface with configId, no endpoint)',
          metric,
          value: round(c[key], 3),
          baseline: 'answerQuery-in-process',
          baseline_definition:
            'routers/knowledge-base/answer.ts answerQuery() on the same queries, in-process, sequential, interleaved query by query with ours',
          baseline_value: round(a[key], 3),
          added_ms: round(c[key] - a[key], 3),
          kb_query_endpoint_ms: round(k[key], 3),
          requests: c.count,
          errors: 0,
          queries: dataset.queries.length,
          queries_measured: chatMs.length,
          concurrency: 1,
          retrieval_depth: config.retrieval_depth,
          chunk_size: config.chunk_size,
          mean_sources: round(sources / Math.max(1, inProcess.length), 2),
          answer: 'extractive (no language model configured)',
        });
      }
    }
  } catch (error) {
    process.exitCode = 1;
    log(`failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
  } finally {
    await service?.cleanup();
    await mock?.close();
    clearTimeout(watchdog);
    log(`done in ${((performance.now() - started) / 1000).toFixed(1)} s`);
  }
}

if (process.env[CHILD_ENV] === '1' && typeof process.send === 'function') serveJobs(runLoadJob);
else await main();
