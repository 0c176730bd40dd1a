/**
 * Shared plumbing of the knowledge-base benchmarks (retrieval-bench.ts, ingest-bench.ts): environment
 * knobs, stdout/stderr conventions, a small HTTPS client that accepts the service's self-signed
 * certificate, multipart uploads, the in-process service in a temp DATA_DIR (or a scratch PostgreSQL
 * database), and an RSS sampler.
 *
 * Conventions (as test/bench/http-bench.ts): stdout carries one JSON line per figure and nothing else;
 * progress and diagnostics go to stderr.
 */
import { randomBytes } from 'node:crypto';
import { Session as InspectorSession } from 'node:inspector/promises';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import postgres from 'postgres';
import { startApp, type RunningApp } from '../../server/app.ts';
import { loadConfig } from '../../schema/config.ts';

// ---- knobs and output ---------------------------------------------------------------------------------

export function intEnv(name: string, fallback: number, min: number, max: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min || value > max) throw new Error(`${name} must be an integer in ${min}..${max}, got ${raw}`);
  return value;
}

export function boolEnv(name: string): boolean {
  return ['1', 'true'].includes(process.env[name] ?? '');
}

export function createLog(bench: string) {
  return (message: string) => process.stderr.write(`[bench:${bench}] ${message}\n`);
}

export const emit = (line: Record<string, unknown>) => process.stdout.write(`${JSON.stringify(line)}\n`);

/** 1-minute load average, to tell a quiet machine from a shared, busy one (2 cores: above ~2 means contention). */
export const loadAverage = () => round(loadavg()[0] ?? NaN, 2);

export const round = (v: number, digits: number) => (Number.isFinite(v) ? Math.round(v * 10 ** digits) / 10 ** digits : null);

/** Nearest-rank percentile of an ascending array (same definition as load.ts). */
export function percentile(sorted: ArrayLike<number>, p: number): number {
  if (sorted.length === 0) return NaN;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))]!;
}

export function latencySummary(latenciesMs: number[]) {
  const sorted = Float64Array.from(latenciesMs).sort();
  const mean = sorted.reduce((s, v) => s + v, 0) / Math.max(1, sorted.length);
  return { count: sorted.length, p50: percentile(sorted, 50), p99: percentile(sorted, 99), mean };
}

/** Runs `fn` over `items` with at most `concurrency` in flight; results in input order. */
export async function mapPool<T, R>(items: readonly T[], concurrency: number, fn: (item: T, index: number) => Promise<R>): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const index = next++;
      results[index] = await fn(items[index]!, index);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, items.length) }, worker));
  return results;
}

// ---- HTTPS client -------------------------------------------------------------------------------------

export interface Reply {
  status: number;
  text: string;
  json: any;
}

// Idle sockets are dropped after 3 s, before the service's 5 s keep-alive timeout closes them under us.
export const benchAgent = new HttpsAgent({ keepAlive: true, maxSockets: 16, rejectUnauthorized: false, timeout: 3_000 });

type CallOptions = { token?: string; body?: unknown; rawBody?: Buffer; headers?: Record<string, string>; timeoutMs?: number };

/**
 * One HTTPS request. A request that fails with ECONNRESET on a reused keep-alive socket (the server
 * closed it as we sent) is retried once on a new one, as Node's documentation recommends.
 */
export async function call(origin: string, method: string, path: string, options: CallOptions = {}): Promise<Reply> {
  try {
    return await callOnce(origin, method, path, options);
  } catch (error) {
    if ((error as { retryable?: boolean }).retryable) return callOnce(origin, method, path, options);
    throw error;
  }
}

function callOnce(origin: string, method: string, path: string, options: CallOptions): Promise<Reply> {
  const headers: Record<string, string> = { ...options.headers };
  let payload: string | Buffer | undefined = options.rawBody;
  if (options.body !== undefined) {
    payload = JSON.stringify(options.body);
    headers['content-type'] = 'application/json';
  }
  if (options.token) headers.authorization = `Bearer ${options.token}`;
  return new Promise((resolve, reject) => {
    const req = httpsRequest(new URL(path, origin), { method, headers, agent: benchAgent }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('error', reject);
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let json: unknown;
        try {
          json = JSON.parse(text);
        } catch {
          json = undefined;
        }
        resolve({ status: res.statusCode ?? 0, text, json });
      });
    });
    req.setTimeout(options.timeoutMs ?? 60_000, () => req.destroy(new Error(`${method} ${path} timed out`)));
    req.on('error', (error: NodeJS.ErrnoException) => {
      if (req.reusedSocket && error.code === 'ECONNRESET') Object.assign(error, { retryable: true });
      reject(error);
    });
    req.end(payload);
  });
}

export async function expectStatus(reply: Promise<Reply>, statuses: number | number[], what: string): Promise<Reply> {
  const r = await reply;
  const ok = Array.isArray(statuses) ? statuses : [statuses];
  if (!ok.includes(r.status)) throw new Error(`${what}: expected ${ok.join('/')}, got ${r.status} ${r.text.slice(0, 300)}`);
  return r;
}

/** A real multipart/form-data body (fields, then one file part named "file"), as curl -F sends it. */
export function multipartBody(fileName: string, contentType: string, bytes: Uint8Array, fields: Record<string, string>): { body: Buffer; contentType: string } {
  const boundary = `----kbbench${randomBytes(8).toString('hex')}`;
  const parts: Buffer[] = [];
  for (const [name, value] of Object.entries(fields)) {
    parts.push(Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${name}"\r\n\r\n${value}\r\n`));
  }
  parts.push(Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="${fileName}"\r\nContent-Type: ${contentType}\r\n\r\n`));
  parts.push(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength), Buffer.from(`\r\n--${boundary}--\r\n`));
  return { body: Buffer.concat(parts), contentType: `multipart/form-data; boundary=${boundary}` };
}

export interface UploadedDocument {
  documentId: string;
  fileName: string;
  duplicate: boolean;
}

/** POST /api/v1/knowledge-base/documents (multipart: configId, file). */
export async function uploadDocument(
  origin: string,
  token: string,
  configId: string,
  fileName: string,
  contentType: string,
  bytes: Uint8Array,
): Promise<UploadedDocument> {
  const { body, contentType: multipartType } = multipartBody(fileName, contentType, bytes, { configId });
  const r = await expectStatus(
    call(origin, 'POST', '/api/v1/knowledge-base/documents', { token, rawBody: body, headers: { 'content-type': multipartType } }),
    [200, 201],
    `upload ${fileName}`,
  );
  return { documentId: r.json.data.document.id as string, fileName: r.json.data.document.fileName as string, duplicate: r.json.data.duplicate === true };
}

// ---- the service in-process ----------------------------------------------------------------------------

/** A scratch database on the server named by DATABASE_URL (created now, dropped by `drop`), or undefined. */
export async function scratchPostgres(log: (m: string) => void): Promise<{ url: string; drop(): Promise<void> } | undefined> {
  const databaseUrl = process.env.DATABASE_URL;
  if (!databaseUrl) return undefined;
  const name = `cis_bench_${randomBytes(5).toString('hex')}`;
  const admin = postgres(databaseUrl, { max: 1, onnotice: () => {} });
  await admin.unsafe(`create database ${name}`);
  const url = new URL(databaseUrl);
  url.pathname = `/${name}`;
  log(`using scratch PostgreSQL database ${name}`);
  return {
    url: url.toString(),
    drop: async () => {
      try {
        await admin.unsafe(`drop database if exists ${name} with (force)`);
      } finally {
        await admin.end();
      }
    },
  };
}

export interface BenchService extends Pick<BenchData, 'dataDir' | 'onCleanup' | 'cleanup'> {
  app: RunningApp;
  databaseKind: 'pglite' | 'postgres';
}

/** Where a benchmark's service keeps its data, and the ordered undoing of everything a run sets up. */
export interface BenchData {
  dataDir: string;
  /** The scratch database's URL when DATABASE_URL names a server, else undefined (embedded PGlite in dataDir). */
  databaseUrl: string | undefined;
  /** Registers a cleanup step; steps run in reverse order of registration, once. */
  onCleanup(what: string, fn: () => Promise<void> | void): void;
  cleanup(): Promise<void>;
}

/**
 * A fresh temp DATA_DIR, and a scratch database on DATABASE_URL's server when it is set, for a service under
 * benchmark (in process or as a process of its own). When this fails, what was made so far is removed.
 */
export async function prepareBenchData(log: (m: string) => void): Promise<BenchData> {
  const dataDir = mkdtempSync(join(tmpdir(), 'cis-kbbench-'));
  const cleanups: Array<[string, () => Promise<void> | void]> = [['remove temp DATA_DIR', () => rmSync(dataDir, { recursive: true, force: true })]];
  let cleaned: Promise<void> | undefined;
  const cleanup = () =>
    (cleaned ??= (async () => {
      for (const [what, fn] of cleanups.reverse()) {
        try {
          await fn();
        } catch (error) {
          log(`cleanup (${what}) failed: ${error instanceof Error ? error.message : String(error)}`);
        }
      }
    })());
  try {
    const pg = await scratchPostgres(log);
    if (pg) cleanups.push(['drop scratch database', pg.drop]);
    return { dataDir, databaseUrl: pg?.url, onCleanup: (what, fn) => void cleanups.push([what, fn]), cleanup };
  } catch (error) {
    await cleanup();
    throw error;
  }
}

/** Rate limits raised so that a benchmark is never throttled (the limiter stays in the request path). */
export const UNTHROTTLED = { RATE_LIMIT_DEFAULT: '100000000', RATE_LIMIT_UPLOAD: '100000000', RATE_LIMIT_KB_QUERY: '100000000' };

/**
 * Starts the service in-process on 127.0.0.1 (random port): embedded PGlite in a fresh temp DATA_DIR,
 * or a scratch database on DATABASE_URL's server, unthrottled. `env` overrides any configuration variable.
 * When start-up fails, what was made so far is cleaned up before the error is rethrown.
 */
export async function startBenchService(log: (m: string) => void, env: Record<string, string> = {}): Promise<BenchService> {
  const data = await prepareBenchData(log);
  try {
    const config = loadConfig({
      PORT: '0',
      HOST: '127.0.0.1',
      DATA_DIR: data.dataDir,
      DATABASE_URL: data.databaseUrl,
      ENCRYPTION_KEY: randomBytes(32).toString('base64'),
      LOG_LEVEL: 'silent',
      ...UNTHROTTLED,
      ...env,
    });
    log(`starting the service (${data.databaseUrl ? 'PostgreSQL' : 'embedded PGlite'}, ${config.JOB_CONCURRENCY} job workers) in ${data.dataDir}`);
    const app = await startApp(config);
    data.onCleanup('close the service', () => app.close());
    data.onCleanup('close the HTTPS agent', () => benchAgent.destroy());
    return { app, dataDir: data.dataDir, databaseKind: app.deps.database.kind, onCleanup: data.onCleanup, cleanup: data.cleanup };
  } catch (error) {
    await data.cleanup();
    throw error;
  }
}

export async function signUp(origin: string): Promise<string> {
  const email = `kbbench-${randomBytes(4).toString('hex')}@example.com`;
  const r = await expectStatus(call(origin, 'POST', '/api/v1/auth/sign-up', { body: { email, password: 'correct horse battery staple' } }), 201, 'sign-up');
  return r.json.data.token as string;
}

export async function createKnowledgeBase(origin: string, token: string, body: Record<string, unknown>): Promise<string> {
  const r = await expectStatus(call(origin, 'POST', '/api/v1/knowledge-base/configs', { token, body }), 201, 'create knowledge base');
  return r.json.data.config.id as string;
}

// ---- memory --------------------------------------------------------------------------------------------

/**
 * Samples a resident set size every `intervalMs` (unref'd timer) until stopped: this process's, or what `readRss`
 * reads (another process's). A failed read (the process has gone) skips the sample: the run fails on its own.
 */
export function startRssSampler(intervalMs = 50, readRss: () => number = () => process.memoryUsage.rss()) {
  const startRss = readRss();
  let peak = startRss;
  let samples = 1;
  const sample = () => {
    try {
      const rss = readRss();
      samples++;
      if (rss > peak) peak = rss;
    } catch {
      // gone
    }
  };
  const timer = setInterval(sample, intervalMs);
  timer.unref();
  return {
    stop() {
      clearInterval(timer);
      sample();
      return { startBytes: startRss, peakBytes: peak, samples };
    },
  };
}

export const mib = (bytes: number) => round(bytes / (1024 * 1024), 1);

/**
 * A hard bound on a whole benchmark run: after `seconds` it logs, runs `cleanup` (whatever was started so far)
 * and exits with 1. Returns the timer, for clearTimeout when the run ends in time.
 */
export function startWatchdog(seconds: number, log: (m: string) => void, cleanup: () => Promise<unknown>): NodeJS.Timeout {
  const watchdog = setTimeout(() => {
    log(`time limit of ${seconds} s reached: cleaning up and exiting`);
    process.exitCode = 1;
    void cleanup().finally(() => process.exit(1));
  }, seconds * 1000);
  watchdog.unref();
  return watchdog;
}

// ---- profiling -----------------------------------------------------------------------------------------

/** A V8 CPU profile as the inspector returns it (what Chrome DevTools opens as a .cpuprofile file). */
export interface CpuProfile {
  nodes: Array<{ id: number; children?: number[] }>;
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

/** Starts the V8 sampling profiler of this process; `stop()` ends it and returns the profile. */
export async function startCpuProfile(): Promise<{ stop(): Promise<CpuProfile> }> {
  const session = new InspectorSession();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.start');
  return {
    async stop() {
      const { profile } = await session.post('Profiler.stop');
      session.disconnect();
      return profile as unknown as CpuProfile;
    },
  };
}

/** With BENCH_CPU_PROFILE (a folder), runs `fn` under the V8 sampling profiler of this process and writes the profile there as `file`. */
export async function profiled<T>(file: string, fn: () => Promise<T>): Promise<T> {
  const dir = process.env.BENCH_CPU_PROFILE;
  if (!dir) return fn();
  const profiler = await startCpuProfile();
  try {
    return await fn();
  } finally {
    writeFileSync(join(dir, file), JSON.stringify(await profiler.stop()));
  }
}
