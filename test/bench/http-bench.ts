/**
 * HTTP benchmark: `npm run bench:http`.
 *
 * Starts the service in-process (bench-kit's startBenchService: embedded PGlite in a fresh temp DATA_DIR, or a scratch
 * PostgreSQL database created and dropped on the server named by DATABASE_URL), signs up one owner with
 * 3 chat interfaces and 5 API keys, and measures requests/s and p50/p99 latency of
 *   - GET /api/v1/health/hosting  (public; one `select 1`)
 *   - GET /api/v1/api-keys        (owner session token)
 * against two baselines measured in the same run, driven the same way and alternately with ours:
 *   - node:http  : a bare server on 127.0.0.1 answering the very bytes our service returned;
 *   - node:https : the same, over TLS with the service's own self-signed certificate
 *                  (the service is HTTPS-only, so this separates TLS cost from our code).
 * Load comes from test/bench/load.ts in a forked child process (see the comment there for why): a fixed
 * number of keep-alive connections, a warm-up, then a fixed measurement window, per target.
 *
 * stdout: one JSON line per figure, nothing else (progress and diagnostics go to stderr):
 *   {"bench":"http","route":...,"metric":"requests_per_second"|"p50_ms"|"p99_ms","value":ours,
 *    "baseline":"node:http"|"node:https","baseline_value":...,"ratio":...,"ratio_definition":...}
 *   requests_per_second: ratio = ours / baseline; latency: ratio = baseline / ours (higher is better for both).
 *
 * Knobs (environment):
 *   BENCH_DURATION_MS     measurement window per target, default 5000 (500..60000)
 *   BENCH_WARMUP_MS       warm-up per target on the same connections, default 1000 (0..10000)
 *   BENCH_CONNECTIONS     concurrent keep-alive connections, default 16 (1..256)
 *   BENCH_ROUNDS          rounds per route, default 1 (1..5); each round runs ours, node:http, node:https,
 *                         every other round in reverse order; figures aggregate all rounds
 *   BENCH_PROFILE=1       instead of the load runs, time the parts of an authenticated GET /api/v1/api-keys
 *                         in-process (one JSON line per part, "bench":"http-profile")
 *   BENCH_PROFILE_ITERATIONS  calls per part in profile mode, default 2000 (100..100000)
 *   BENCH_CPU_PROFILE     a folder: the V8 CPU profile of this process (the service) during each load run on ours is
 *                         written there as http-<path>-<round>.cpuprofile
 *   DATABASE_URL          optional postgres:// URL of a server on which a scratch database is created and dropped
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { createServer as createHttpServer, type IncomingMessage, type Server as HttpServer, type ServerResponse } from 'node:http';
import { Agent as HttpsAgent, createServer as createHttpsServer, request as httpsRequest } from 'node:https';
import type { AddressInfo } from 'node:net';
import type { RunningApp } from '../../server/app.ts';
import { createContext } from '../../server/dispatch.ts';
import { loadTlsMaterial } from '../../server/tls.ts';
import { appRouter } from '../../routers/app-router.ts';
import { resolveCaller } from '../../routers/auth/caller.ts';
import { sha256Hex } from '../../adapters/outbound/secrets.ts';
import * as apiKeys from '../../routers/api-keys/repository.ts';
import { successBody } from '../../adapters/inbound/envelope.ts';
import { forkLoadWorker, percentile, type LoadResult, type LoadWorker } from './load.ts';
import { profiled, startBenchService, type BenchService } from './bench-kit.ts';

// ---- knobs ----------------------------------------------------------------------------------------

function intEnv(name: string, fallback: number, min: number, max: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min || value > max) throw new Error(`${name} must be an integer in ${min}..${max}, got ${raw}`);
  return value;
}

const DURATION_MS = intEnv('BENCH_DURATION_MS', 5_000, 500, 60_000);
const WARMUP_MS = intEnv('BENCH_WARMUP_MS', 1_000, 0, 10_000);
const CONNECTIONS = intEnv('BENCH_CONNECTIONS', 16, 1, 256);
const ROUNDS = intEnv('BENCH_ROUNDS', 1, 1, 5);
const PROFILE = ['1', 'true'].includes(process.env.BENCH_PROFILE ?? '');
const PROFILE_ITERATIONS = intEnv('BENCH_PROFILE_ITERATIONS', 2_000, 100, 100_000);

const log = (message: string) => process.stderr.write(`[bench:http] ${message}\n`);
const emit = (line: Record<string, unknown>) => process.stdout.write(`${JSON.stringify(line)}\n`);
const round = (v: number, digits: number) => (Number.isFinite(v) ? Math.round(v * 10 ** digits) / 10 ** digits : null);

// ---- a tiny HTTPS client for setup (the service's self-signed certificate is accepted) -------------

interface Reply {
  status: number;
  headers: IncomingMessage['headers'];
  bytes: Buffer;
  json: any;
}

const setupAgent = new HttpsAgent({ keepAlive: true, maxSockets: 4, rejectUnauthorized: false });

function call(origin: string, method: string, path: string, options: { token?: string; body?: unknown; agent?: HttpsAgent } = {}): Promise<Reply> {
  const headers: Record<string, string> = {};
  const payload = options.body === undefined ? undefined : JSON.stringify(options.body);
  if (payload !== undefined) headers['content-type'] = 'application/json';
  if (options.token) headers.authorization = `Bearer ${options.token}`;
  return new Promise((resolve, reject) => {
    const req = httpsRequest(new URL(path, origin), { method, headers, agent: options.agent ?? setupAgent }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('error', reject);
      res.on('end', () => {
        const bytes = Buffer.concat(chunks);
        let json: unknown;
        try {
          json = JSON.parse(bytes.toString('utf8'));
        } catch {
          json = undefined;
        }
        resolve({ status: res.statusCode ?? 0, headers: res.headers, bytes, json });
      });
    });
    req.setTimeout(30_000, () => req.destroy(new Error(`${method} ${path} timed out`)));
    req.on('error', reject);
    req.end(payload);
  });
}

async function expectStatus(reply: Promise<Reply>, status: number, what: string): Promise<Reply> {
  const r = await reply;
  if (r.status !== status) throw new Error(`${what}: expected ${status}, got ${r.status} ${r.bytes.toString('utf8').slice(0, 300)}`);
  return r;
}

// ---- database: embedded PGlite by default, or a scratch database on DATABASE_URL's server ----------

// ---- baselines: bare node:http and node:https servers answering captured bytes ----------------------

interface CapturedResponse {
  contentType: string;
  body: Buffer;
}

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

async function startBaselines(bodies: Map<string, CapturedResponse>, tls: { cert: string; key: string }) {
  // Same timeouts as server/listener.ts; the handler does the least a JSON endpoint can do.
  const serverOptions = { keepAliveTimeout: 5_000, headersTimeout: 20_000, requestTimeout: 120_000 };
  const handler = (req: IncomingMessage, res: ServerResponse) => {
    const captured = bodies.get(req.url ?? '');
    if (!captured) {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { 'Content-Type': captured.contentType, 'Content-Length': captured.body.byteLength });
    res.end(captured.body);
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

// ---- load runs ---------------------------------------------------------------------------------------

type TargetName = 'ours' | 'node:http' | 'node:https';

interface Aggregate {
  requests: number;
  errors: number;
  elapsedMs: number;
  /** Load-generator CPU-milliseconds over the windows (for client_cpu_cores: ~1 means the client was the bottleneck). */
  clientCpuMs: number;
  latencies: Float64Array[];
}

function summarise(a: Aggregate) {
  const all = new Float64Array(a.latencies.reduce((n, l) => n + l.length, 0));
  let offset = 0;
  for (const l of a.latencies) {
    all.set(l, offset);
    offset += l.length;
  }
  all.sort();
  return { rps: (a.requests / a.elapsedMs) * 1000, p50: percentile(all, 50), p99: percentile(all, 99) };
}

async function benchRoute(worker: LoadWorker, route: { label: string; path: string; headers: Record<string, string> }, origins: Record<TargetName, string>) {
  const aggregates = new Map<TargetName, Aggregate>();
  for (let r = 0; r < ROUNDS; r++) {
    const order: TargetName[] = r % 2 === 0 ? ['ours', 'node:http', 'node:https'] : ['node:https', 'node:http', 'ours'];
    for (const target of order) {
      log(`${route.label} -> ${target} (round ${r + 1}/${ROUNDS}, ${CONNECTIONS} connections, ${WARMUP_MS} ms warm-up + ${DURATION_MS} ms)`);
      const cpuBefore = process.cpuUsage();
      const load = () =>
        worker.run({
          origin: origins[target],
          path: route.path,
          headers: route.headers,
          connections: CONNECTIONS,
          warmupMs: WARMUP_MS,
          durationMs: DURATION_MS,
          expectStatus: 200,
        });
      const result: LoadResult = target === 'ours' ? await profiled(`http-${route.path.replaceAll('/', '_')}-${r + 1}.cpuprofile`, load) : await load();
      const serverCpu = process.cpuUsage(cpuBefore);
      const s = summarise({ requests: result.requests, errors: result.errors, elapsedMs: result.elapsedMs, clientCpuMs: 0, latencies: [result.latenciesMs] });
      log(
        `   ${s.rps.toFixed(0)} req/s, p50 ${s.p50.toFixed(2)} ms, p99 ${s.p99.toFixed(2)} ms, errors ${result.errors}` +
          `${result.firstError ? ` (${result.firstError})` : ''}, sockets ${result.socketsOpened}, ` +
          `client CPU ${(result.clientCpuCores * 100).toFixed(0)}% of a core, server process CPU ~${(((serverCpu.user + serverCpu.system) / 1000 / (WARMUP_MS + DURATION_MS)) * 100).toFixed(0)}%`,
      );
      if (result.requests === 0) throw new Error(`${route.label} -> ${target}: no successful request (${result.firstError ?? 'no error recorded'})`);
      const a = aggregates.get(target) ?? { requests: 0, errors: 0, elapsedMs: 0, clientCpuMs: 0, latencies: [] };
      a.clientCpuMs += result.clientCpuCores * result.elapsedMs;
      a.requests += result.requests;
      a.errors += result.errors;
      a.elapsedMs += result.elapsedMs;
      a.latencies.push(result.latenciesMs);
      aggregates.set(target, a);
    }
  }

  const ours = aggregates.get('ours')!;
  const oursSummary = summarise(ours);
  for (const baseline of ['node:http', 'node:https'] as const) {
    const base = aggregates.get(baseline)!;
    const baseSummary = summarise(base);
    const common = { bench: 'http', route: route.label };
    const extra = {
      connections: CONNECTIONS,
      duration_ms: DURATION_MS,
      rounds: ROUNDS,
      requests: ours.requests,
      errors: ours.errors,
      baseline_requests: base.requests,
      baseline_errors: base.errors,
      // CPU of the load generator in cores (1 = one core saturated): near 1 the figure is client-bound, a lower bound.
      client_cpu_cores: round(ours.clientCpuMs / ours.elapsedMs, 2),
      baseline_client_cpu_cores: round(base.clientCpuMs / base.elapsedMs, 2),
    };
    emit({
      ...common,
      metric: 'requests_per_second',
      value: round(oursSummary.rps, 1),
      baseline,
      baseline_value: round(baseSummary.rps, 1),
      ratio: round(oursSummary.rps / baseSummary.rps, 4),
      ratio_definition: 'ours / baseline (higher is better)',
      ...extra,
    });
    for (const [metric, key] of [
      ['p50_ms', 'p50'],
      ['p99_ms', 'p99'],
    ] as const) {
      emit({
        ...common,
        metric,
        value: round(oursSummary[key], 3),
        baseline,
        baseline_value: round(baseSummary[key], 3),
        ratio: round(baseSummary[key] / oursSummary[key], 4),
        ratio_definition: 'baseline / ours (higher is better)',
        ...extra,
      });
    }
  }
}

// ---- profile mode: where the time of an authenticated GET /api/v1/api-keys goes ----------------------

async function profile(app: RunningApp, owner: { token: string; ownerId: string }, baselineHttpsOrigin: string) {
  const route = 'GET /api/v1/api-keys';
  const deps = app.deps;
  const db = deps.database.db;
  const authorization = `Bearer ${owner.token}`;
  const fakeReq = { headers: { authorization } } as unknown as IncomingMessage;
  const newCtx = () => createContext(deps, fakeReq, randomUUID(), '127.0.0.1');
  const procedure = (appRouter as unknown as { _def: { procedures: Record<string, { _def: { output?: { parse(v: unknown): unknown } } }> } })._def.procedures[
    'apiKeys.list'
  ];
  const outputSchema = procedure?._def.output;
  if (!outputSchema) throw new Error('apiKeys.list has no output schema to time');
  const limit = deps.config.RATE_LIMIT_DEFAULT;
  const windowMs = deps.config.RATE_LIMIT_WINDOW_SECONDS * 1000;

  // Mirrors of the two queries a request runs (routers/auth/sessions.ts and routers/api-keys/repository.ts),
  // compiled once, to split "build + compile SQL" from "execute".
  const sessionId = sha256Hex(owner.token);
  const sessionQuery = () =>
    db
      .selectFrom('sessions')
      .innerJoin('owners', 'owners.id', 'sessions.owner_id')
      .select(['sessions.id', 'sessions.owner_id', 'sessions.expires_at', 'owners.email', 'owners.name', 'owners.plan', 'owners.role'])
      .where('sessions.id', '=', sessionId);
  const listQuery = () => db.selectFrom('api_keys').selectAll().where('owner_id', '=', owner.ownerId).orderBy('created_at', 'desc').orderBy('id');
  const sessionCompiled = sessionQuery().compile();
  const listCompiled = listQuery().compile();

  const rows = await apiKeys.listKeys(db, owner.ownerId);
  const output = { apiKeys: rows.map(apiKeys.toApiKey), count: rows.length };
  const resolvedCtx = newCtx();
  await resolvedCtx.getCaller();

  const oneConnection = new HttpsAgent({ keepAlive: true, maxSockets: 1, rejectUnauthorized: false });
  const viaHttps = (origin: string) => async () => {
    const r = await call(origin, 'GET', '/api/v1/api-keys', { token: owner.token, agent: oneConnection });
    if (r.status !== 200) throw new Error(`GET /api/v1/api-keys via ${origin}: ${r.status}`);
  };

  const parts: Array<[string, () => unknown]> = [
    ['full request over HTTPS, ours (in-process client, 1 keep-alive connection, sequential)', viaHttps(app.url)],
    ['full request over HTTPS, bare node:https baseline (same client)', viaHttps(baselineHttpsOrigin)],
    ['apiKeys.list() via appRouter.createCaller(fresh ctx): everything below except HTTP/REST glue', () => appRouter.createCaller(newCtx()).apiKeys.list()],
    [
      'apiKeys.list() via createCaller(ctx with caller already resolved): tRPC + rate limit + query + output validation',
      () => appRouter.createCaller(resolvedCtx).apiKeys.list(),
    ],
    ['createContext (server/dispatch.ts)', newCtx],
    ['resolveCaller: session validation (sha256 + lucia validateSession = 1 join query)', () => resolveCaller(deps, authorization)],
    ['  sha256Hex(token)', () => sha256Hex(owner.token)],
    ['  session query: kysely build + compile only', () => sessionQuery().compile()],
    ['  session query: execute precompiled (db.executeQuery)', () => db.executeQuery(sessionCompiled)],
    ['rateLimiter.hit (memory limiter, same limit/window)', () => deps.rateLimiter.hit(`default:bench.profile:o:${owner.ownerId}`, limit, windowMs)],
    ['listKeys (routers/api-keys/repository.ts, build + execute)', () => apiKeys.listKeys(db, owner.ownerId)],
    ['  listKeys: kysely build + compile only', () => listQuery().compile()],
    ['  listKeys: execute precompiled (db.executeQuery)', () => db.executeQuery(listCompiled)],
    ['database.ping (select 1): bare database round trip', () => deps.database.ping()],
    ['rows.map(toApiKey)', () => rows.map(apiKeys.toApiKey)],
    ['zod output validation (the procedure output schema)', () => outputSchema.parse(output)],
    ['JSON.stringify of the REST envelope', () => JSON.stringify(successBody(output, false))],
  ];

  const measured: Array<{ part: string; us: number; cpuUs: number }> = [];
  try {
    for (const [part, fn] of parts) {
      const warmup = Math.min(500, Math.ceil(PROFILE_ITERATIONS / 4));
      for (let i = 0; i < warmup; i++) await fn();
      const cpu0 = process.cpuUsage();
      const t0 = performance.now();
      for (let i = 0; i < PROFILE_ITERATIONS; i++) await fn();
      const wallUs = ((performance.now() - t0) * 1000) / PROFILE_ITERATIONS;
      const cpu = process.cpuUsage(cpu0);
      const cpuUs = (cpu.user + cpu.system) / PROFILE_ITERATIONS;
      measured.push({ part, us: wallUs, cpuUs });
      log(`${part}: ${wallUs.toFixed(1)} us/call (cpu ${cpuUs.toFixed(1)} us)`);
    }
  } finally {
    oneConnection.destroy();
  }
  const full = measured[0]!.us;
  for (const m of measured) {
    emit({
      bench: 'http-profile',
      route,
      part: m.part.trim(),
      metric: 'us_per_call',
      value: round(m.us, 2),
      cpu_us_per_call: round(m.cpuUs, 2),
      calls: PROFILE_ITERATIONS,
      share_of_full_request: round(m.us / full, 4),
      database: deps.database.kind,
      note: 'sequential in-process timings (one call at a time); the client shares the process for the two full-request parts',
    });
  }
}

// ---- main ----------------------------------------------------------------------------------------------

async function main() {
  const started = performance.now();
  let service: BenchService | undefined;
  try {
    // Rate limits raised by bench-kit so the benchmark is never throttled; the limiter stays in the request path.
    service = await startBenchService(log);
    const { app, dataDir } = service;
    const config = app.deps.config;
    service.onCleanup('close setup agent', () => setupAgent.destroy());
    log(`service on ${app.url}`);

    // One owner with 3 chat interfaces and 5 API keys.
    const email = `bench-${randomBytes(4).toString('hex')}@example.com`;
    const signUp = await expectStatus(
      call(app.url, 'POST', '/api/v1/auth/sign-up', { body: { email, password: 'correct horse battery staple' } }),
      201,
      'sign-up',
    );
    const owner = { token: signUp.json.data.token as string, ownerId: signUp.json.data.owner.id as string };
    const interfaceIds: string[] = [];
    for (let i = 1; i <= 3; i++) {
      const r = await expectStatus(
        call(app.url, 'POST', '/api/v1/chat-interfaces', { token: owner.token, body: { name: `Bench interface ${i}` } }),
        201,
        'create chat interface',
      );
      interfaceIds.push(r.json.data.chatInterface.id as string);
    }
    for (let i = 1; i <= 5; i++) {
      await expectStatus(
        call(app.url, 'POST', '/api/v1/api-keys', {
          token: owner.token,
          body: { name: `Bench key ${i}`, chatInterfaceId: interfaceIds[(i - 1) % interfaceIds.length] },
        }),
        201,
        'create API key',
      );
    }

    const routes = [
      { label: 'GET /api/v1/health/hosting', path: '/api/v1/health/hosting', headers: {} as Record<string, string> },
      { label: 'GET /api/v1/api-keys', path: '/api/v1/api-keys', headers: { authorization: `Bearer ${owner.token}` } },
    ];
    const bodies = new Map<string, CapturedResponse>();
    for (const route of routes) {
      const r = await expectStatus(call(app.url, 'GET', route.path, { token: route.headers.authorization?.slice('Bearer '.length) }), 200, route.label);
      bodies.set(route.path, { contentType: String(r.headers['content-type'] ?? 'application/json'), body: r.bytes });
      log(`${route.label}: ${r.bytes.byteLength} body bytes captured for the baselines`);
    }
    const apiKeysBody = bodies.get('/api/v1/api-keys');
    if (apiKeysBody && JSON.parse(apiKeysBody.body.toString('utf8')).data.count !== 5) throw new Error('expected 5 API keys in the listing');

    // The baselines use the service's own certificate (loadTlsMaterial returns the one it created in DATA_DIR).
    const tls = await loadTlsMaterial({ certPath: config.TLS_CERT, keyPath: config.TLS_KEY, dataDir });
    const baselines = await startBaselines(bodies, tls);
    service.onCleanup('close baseline servers', baselines.close);

    if (PROFILE) {
      log(`profile mode: ${PROFILE_ITERATIONS} sequential calls per part`);
      await profile(app, owner, baselines.httpsOrigin);
    } else {
      const worker = forkLoadWorker();
      service.onCleanup('stop load generator', () => worker.close());
      const origins: Record<TargetName, string> = { ours: new URL(app.url).origin, 'node:http': baselines.httpOrigin, 'node:https': baselines.httpsOrigin };
      for (const route of routes) await benchRoute(worker, route, origins);
    }
  } catch (error) {
    process.exitCode = 1;
    log(`failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
  } finally {
    await service?.cleanup();
    log(`done in ${((performance.now() - started) / 1000).toFixed(1)} s`);
  }
}

await main();
