/**
 * Hostile-document benchmark: `npm run bench:hostile`.
 *
 * Does the service keep answering while it parses documents built to be expensive? A PDF of ~700 bytes whose
 * content stream holds 60,000 graphics-state saves (`q`) keeps pdf.js busy for minutes; before parsing moved to
 * worker threads (adapters/outbound/workers/), one such upload stalled every request for as long.
 *
 * Measures GET /api/v1/health/hosting latency over HTTPS (load from test/bench/load.ts in a child process: a
 * fixed number of keep-alive connections, closed loop, a warm-up, then a measurement window), twice in the same
 * run against the same in-process service (bench-kit's startBenchService, default configuration):
 *   1. baseline: no document processing;
 *   2. hostile: BENCH_HOSTILE_DOCS such PDFs uploaded, measured once every parsing worker is busy with one
 *      (the service's default 60 s deadline outlasts the window; the run checks the workers are still busy at
 *      its end, so every sample was taken under that load).
 * Target: health p99 under hostile load below 50 ms.
 *
 * stdout: one JSON line per figure, nothing else (progress on stderr):
 *   {"bench":"hostile","route":"GET /api/v1/health/hosting","metric":"p50_ms"|"p99_ms"|"requests_per_second",
 *    "value":hostile,"baseline":"no-documents","baseline_value":...,"ratio":...,"ratio_definition":...}
 *   latency: ratio = baseline / hostile; requests_per_second: ratio = hostile / baseline (higher is better for both).
 *
 * Knobs (environment):
 *   BENCH_HOSTILE_DOCS    hostile PDFs uploaded, default 4 (1..32)
 *   BENCH_OPERATORS       `q` operators per PDF, default 60000 (10000..1000000)
 *   BENCH_DURATION_MS     measurement window per phase, default 5000 (500..60000)
 *   BENCH_WARMUP_MS       warm-up per phase on the same connections, default 1000 (0..10000)
 *   BENCH_CONNECTIONS     concurrent keep-alive connections, default 2 (1..64)
 *   BENCH_PARSER_WORKERS  the service's PARSER_WORKERS, default: the service's default
 *   BENCH_TIMEOUT_S       hard bound on the whole run, default 300 (30..3600)
 *   DATABASE_URL          optional postgres:// URL of a server on which a scratch database is created and dropped
 */
import { hostilePdf } from '../helpers/hostile-pdf.ts';
import { forkLoadWorker, type LoadResult } from './load.ts';
import {
  createKnowledgeBase,
  createLog,
  emit,
  intEnv,
  latencySummary,
  loadAverage,
  round,
  signUp,
  startBenchService,
  startWatchdog,
  uploadDocument,
  type BenchService,
} from './bench-kit.ts';

const DOCS = intEnv('BENCH_HOSTILE_DOCS', 4, 1, 32);
const OPERATORS = intEnv('BENCH_OPERATORS', 60_000, 10_000, 1_000_000);
const DURATION_MS = intEnv('BENCH_DURATION_MS', 5_000, 500, 60_000);
const WARMUP_MS = intEnv('BENCH_WARMUP_MS', 1_000, 0, 10_000);
const CONNECTIONS = intEnv('BENCH_CONNECTIONS', 2, 1, 64);
const TIMEOUT_S = intEnv('BENCH_TIMEOUT_S', 300, 30, 3600);
const TARGET_P99_MS = 50;
const ROUTE = '/api/v1/health/hosting';

const log = createLog('hostile');

async function measure(service: BenchService, worker: ReturnType<typeof forkLoadWorker>, phase: string) {
  log(`${phase}: GET ${ROUTE}, ${CONNECTIONS} connections, ${WARMUP_MS} ms warm-up + ${DURATION_MS} ms`);
  const result: LoadResult = await worker.run({
    origin: service.app.url,
    path: ROUTE,
    headers: {},
    connections: CONNECTIONS,
    warmupMs: WARMUP_MS,
    durationMs: DURATION_MS,
    expectStatus: 200,
  });
  if (result.requests === 0) throw new Error(`${phase}: no successful request (${result.firstError ?? 'no error recorded'})`);
  const latency = latencySummary(Array.from(result.latenciesMs));
  const rps = (result.requests / result.elapsedMs) * 1000;
  log(`  ${rps.toFixed(0)} req/s, p50 ${latency.p50.toFixed(2)} ms, p99 ${latency.p99.toFixed(2)} ms, errors ${result.errors}`);
  return { ...latency, rps, errors: result.errors };
}

async function waitUntil(what: string, check: () => boolean, deadline: number) {
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

async function main() {
  const started = performance.now();
  const deadline = Date.now() + TIMEOUT_S * 1000;
  let service: BenchService | undefined;
  const watchdog = startWatchdog(TIMEOUT_S, log, async () => service?.cleanup());
  const loadAtStart = loadAverage();
  try {
    const env: Record<string, string> = {};
    if (process.env.BENCH_PARSER_WORKERS) env.PARSER_WORKERS = String(intEnv('BENCH_PARSER_WORKERS', 2, 1, 16));
    service = await startBenchService(log, env);
    const { app } = service;
    const pool = app.deps.documentPool;
    const worker = forkLoadWorker();
    service.onCleanup('stop load generator', () => worker.close());
    const token = await signUp(app.url);
    const configId = await createKnowledgeBase(app.url, token, { name: 'Hostile bench' });

    const baseline = await measure(service, worker, 'baseline (no documents processing)');

    const pdfs = Array.from({ length: DOCS }, (_, i) => hostilePdf(OPERATORS + i));
    log(`uploading ${DOCS} hostile PDFs (${pdfs[0]!.length} bytes, ${OPERATORS} operators each); ${pool.stats().size} parsing workers`);
    for (const [i, pdf] of pdfs.entries()) await uploadDocument(app.url, token, configId, `hostile-${i + 1}.pdf`, 'application/pdf', pdf);
    const expectedBusy = Math.min(DOCS, pool.stats().size);
    await waitUntil(`${expectedBusy} parsing workers are busy`, () => pool.stats().busy === expectedBusy, deadline);
    const hostile = await measure(service, worker, `hostile (${DOCS} documents processing)`);
    const busyAtEnd = pool.stats().busy;
    if (busyAtEnd < expectedBusy)
      throw new Error(`only ${busyAtEnd} of ${expectedBusy} workers were still busy at the end of the window: raise BENCH_OPERATORS`);

    const common = {
      bench: 'hostile',
      route: `GET ${ROUTE}`,
      baseline: 'no-documents',
      hostile_documents: DOCS,
      operators_per_document: OPERATORS,
      document_bytes: pdfs[0]!.length,
      parser_workers: pool.stats().size,
      busy_workers: busyAtEnd,
      connections: CONNECTIONS,
      duration_ms: DURATION_MS,
      database: service.databaseKind,
      load_avg_1m_start: loadAtStart,
      load_avg_1m_end: loadAverage(),
    };
    const latencyRatio = 'baseline / ours (higher is better)';
    emit({
      ...common,
      metric: 'p50_ms',
      value: round(hostile.p50, 3),
      baseline_value: round(baseline.p50, 3),
      ratio: round(baseline.p50 / hostile.p50, 4),
      ratio_definition: latencyRatio,
    });
    emit({
      ...common,
      metric: 'p99_ms',
      value: round(hostile.p99, 3),
      baseline_value: round(baseline.p99, 3),
      ratio: round(baseline.p99 / hostile.p99, 4),
      ratio_definition: latencyRatio,
      target_ms: TARGET_P99_MS,
      meets_target: hostile.p99 < TARGET_P99_MS,
    });
    emit({
      ...common,
      metric: 'requests_per_second',
      value: round(hostile.rps, 1),
      baseline_value: round(baseline.rps, 1),
      ratio: round(hostile.rps / baseline.rps, 4),
      ratio_definition: 'ours / baseline (higher is better)',
      errors: hostile.errors,
      baseline_errors: baseline.errors,
    });
  } catch (error) {
    process.exitCode = 1;
    log(`failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
  } finally {
    await service?.cleanup();
    clearTimeout(watchdog);
    log(`done in ${((performance.now() - started) / 1000).toFixed(1)} s`);
  }
}

await main();
