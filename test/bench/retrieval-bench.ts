/**
 * Retrieval benchmark on SciFact (BEIR test split): `npm run bench:retrieval`.
 *
 * 1. Starts the service in-process (embedded PGlite in a temp DATA_DIR, or a scratch PostgreSQL database on
 *    DATABASE_URL's server; both removed at the end), signs up, creates a knowledge base (chunkSize 8000,
 *    overlap 0: every abstract but two is one chunk; retrievalDepth 50, the maximum) and ingests the corpus
 *    through the real ingestion code: each abstract (title + "\n\n" + text) is uploaded as `<corpus-id>.txt`
 *    through POST /api/v1/knowledge-base/documents over HTTPS (BENCH_UPLOAD_CONCURRENCY in flight, from a child
 *    process of its own, upload-client.ts, so the client's work is not on the service's event loop), and the
 *    background job workers take it to `completed`. Ingestion rate (docs/s, first upload to last document
 *    completed) is reported against the same per-document work done in-process without HTTP, queue or
 *    database (extract + split + embed + analyse), measured in the same run.
 * 2. Quality: the 300 test queries go through `retrieve()` in-process at depth 100, in modes hybrid, lexical
 *    and vector; chunks map to corpus ids through the file name. nDCG@10 (graded gains from the qrels,
 *    log2 discount, ideal DCG from the qrels) and recall@100 (share of the relevant documents in the first
 *    100), averaged over the 300 queries, as BEIR/pytrec_eval define them. Baseline in the same run: plain
 *    BM25 in memory (`Bm25Index`, k1 0.9, b 0.4) over the same title + text; the published BM25 figure
 *    (0.679, Anserini flat) rides along as a constant.
 * 3. Latency: each test query once through POST /api/v1/knowledge-base/query over HTTPS (sequential, one in
 *    flight, after a short warm-up), p50/p99; baseline: the same query through `retrieve()` in-process at
 *    the knowledge base's depth, interleaved with the HTTPS one (order alternating per query) so both see
 *    the same machine load. The difference is what the endpoint adds: HTTPS, auth, rate limit, validation,
 *    the extractive answer, serialisation.
 *
 * stdout: one JSON line per figure, nothing else (progress on stderr):
 *   {"bench":"retrieval","dataset":"scifact","metric":"ndcg@10"|"recall@100","mode":...,"value":...,
 *    "baseline":"bm25-in-memory","baseline_value":...,"ratio":value/baseline,"published_bm25":0.679,
 *    "target":0.7,"meets_target":...,...}
 *   {"bench":"retrieval","metric":"query_p50_ms"|"query_p99_ms","value":...,"baseline":"retrieve-in-process",
 *    "target_ms":20|50,"meets_target":...,...}
 *   {"bench":"retrieval","metric":"ingest_docs_per_second","value":...,"baseline":"pipeline-in-process-no-db",
 *    "target_ratio":0.25,"meets_target":...,...}
 *
 * Knobs (environment):
 *   BENCH_SCIFACT_DIR          dataset folder, default ../shared/datasets/scifact beside the repository
 *   BENCH_CORPUS_LIMIT         0 = whole corpus (default); N = the judged documents plus the first N others
 *                              (a quick smoke run: figures are then not comparable to published ones)
 *   BENCH_UPLOAD_CONCURRENCY   uploads in flight, default 8 (1..64)
 *   BENCH_JOB_CONCURRENCY      the service's JOB_CONCURRENCY, default 4 (its own default; 1..32)
 *   BENCH_TIMEOUT_S            hard bound on the whole run, default 900 (60..3600): then it cleans up and exits 1
 *   BENCH_INGEST_ONLY=1        stop after the ingestion figure (no quality or latency): to iterate on ingestion
 *   BENCH_SWEEP=1              also fuse the lexical and vector candidate lists in memory over a grid of
 *                              LEXICAL_WEIGHT x RRF_K x CANDIDATES ("bench":"retrieval-sweep" lines), to tune
 *                              routers/knowledge-base/retrieve.ts; the fusion formula is the one in retrieve()
 *   BENCH_CPU_PROFILE          a folder: the V8 CPU profiles of the ingestion and latency phases (this process: the service)
 *                              are written there as retrieval-ingest.cpuprofile and retrieval-latency.cpuprofile
 *   DATABASE_URL               optional postgres:// URL of a server on which a scratch database is created and dropped
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { sql } from 'kysely';
import { createLocalEmbedder } from '../../adapters/outbound/embeddings/local-embedder.ts';
import { extractDocument } from '../../adapters/outbound/parsers/extract.ts';
import { embedderFor } from '../../routers/knowledge-base/embedders.ts';
import { splitPages } from '../../adapters/outbound/parsers/prepare.ts';
import { findConfigById, type KbConfigRow } from '../../routers/knowledge-base/repository.ts';
import { CANDIDATES, LEXICAL_WEIGHT, retrieve, RRF_K } from '../../routers/knowledge-base/retrieve.ts';
import { lexicalSearch } from '../../routers/knowledge-base/search-repository.ts';
import { Bm25Index, BM25_DEFAULT_B, BM25_DEFAULT_K1 } from '../../adapters/outbound/text/bm25.ts';
import { analyze, termFrequencies } from '../../adapters/outbound/text/text-analysis.ts';
import { countTokens } from '../../adapters/outbound/text/tokens.ts';
import { isZeroVector } from '../../routers/knowledge-base/vectors.ts';
import type { AppDeps } from '../../routers/context.ts';
import {
  boolEnv,
  call,
  createKnowledgeBase,
  createLog,
  emit,
  expectStatus,
  intEnv,
  latencySummary,
  loadAverage,
  round,
  signUp,
  startBenchService,
  profiled,
  startWatchdog,
  type BenchService,
} from './bench-kit.ts';
import { forkUploadClient, type UploadClient } from './upload-client.ts';

const SCIFACT_DIR = process.env.BENCH_SCIFACT_DIR || join(fileURLToPath(new URL('../../', import.meta.url)), '..', 'shared', 'datasets', 'scifact');
const CORPUS_LIMIT = intEnv('BENCH_CORPUS_LIMIT', 0, 0, 1_000_000);
const UPLOAD_CONCURRENCY = intEnv('BENCH_UPLOAD_CONCURRENCY', 8, 1, 64);
const JOB_CONCURRENCY = intEnv('BENCH_JOB_CONCURRENCY', 4, 1, 32);
const TIMEOUT_S = intEnv('BENCH_TIMEOUT_S', 900, 60, 3600);
const SWEEP = boolEnv('BENCH_SWEEP');
const INGEST_ONLY = boolEnv('BENCH_INGEST_ONLY');

const EVAL_DEPTH = 100;
const CHUNK_SIZE = 8000;
const RETRIEVAL_DEPTH = 50;
const LATENCY_WARMUP = 20;
const PUBLISHED_BM25_NDCG10 = 0.679;
/** The performance issue's goals: nDCG@10 (hybrid, no model download), ingestion against the in-process pipeline, query latency over HTTPS. */
const TARGET_NDCG10 = 0.7;
const TARGET_INGEST_RATIO = 0.25;
const TARGET_QUERY_MS = { p50: 20, p99: 50 } as const;
const BM25_K1 = BM25_DEFAULT_K1;
const BM25_B = BM25_DEFAULT_B;
const MODES = ['hybrid', 'lexical', 'vector'] as const;
type Mode = (typeof MODES)[number];

const log = createLog('retrieval');

// ---- dataset -------------------------------------------------------------------------------------------

interface Dataset {
  corpus: Array<{ id: string; text: string }>;
  queries: Array<{ id: string; text: string }>;
  /** query id -> corpus id -> graded relevance (> 0) */
  qrels: Map<string, Map<string, number>>;
  subset: boolean;
}

function readJsonl(path: string): any[] {
  return readFileSync(path, 'utf8')
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => JSON.parse(line));
}

function loadScifact(): Dataset {
  for (const file of ['corpus.jsonl', 'queries.jsonl', 'qrels/test.tsv']) {
    if (!existsSync(join(SCIFACT_DIR, file))) throw new Error(`SciFact not found: ${join(SCIFACT_DIR, file)} is missing (set BENCH_SCIFACT_DIR)`);
  }
  const qrels = new Map<string, Map<string, number>>();
  const lines = readFileSync(join(SCIFACT_DIR, 'qrels/test.tsv'), 'utf8').split('\n');
  for (const line of lines.slice(1)) {
    const [queryId, corpusId, score] = line.trim().split('\t');
    if (!queryId || !corpusId || score === undefined) continue;
    const grade = Number(score);
    if (!(grade > 0)) continue;
    if (!qrels.has(queryId)) qrels.set(queryId, new Map());
    qrels.get(queryId)!.set(corpusId, grade);
  }
  const allQueries = new Map(readJsonl(join(SCIFACT_DIR, 'queries.jsonl')).map((q) => [String(q._id), String(q.text)]));
  const queries = [...qrels.keys()].map((id) => {
    const text = allQueries.get(id);
    if (text === undefined) throw new Error(`query ${id} of the qrels is not in queries.jsonl`);
    return { id, text };
  });
  let corpus = readJsonl(join(SCIFACT_DIR, 'corpus.jsonl')).map((d) => ({ id: String(d._id), text: `${String(d.title ?? '')}\n\n${String(d.text ?? '')}` }));
  const subset = CORPUS_LIMIT > 0 && CORPUS_LIMIT < corpus.length;
  if (subset) {
    const judged = new Set([...qrels.values()].flatMap((m) => [...m.keys()]));
    let others = 0;
    corpus = corpus.filter((d) => judged.has(d.id) || others++ < CORPUS_LIMIT);
  }
  return { corpus, queries, qrels, subset };
}

// ---- metrics (BEIR / pytrec_eval definitions) ----------------------------------------------------------

function ndcgAt(k: number, ranked: string[], relevant: Map<string, number>): number {
  let dcg = 0;
  for (let i = 0; i < Math.min(k, ranked.length); i++) dcg += (relevant.get(ranked[i]!) ?? 0) / Math.log2(i + 2);
  const ideal = [...relevant.values()].sort((a, b) => b - a).slice(0, k);
  const idcg = ideal.reduce((s, g, i) => s + g / Math.log2(i + 2), 0);
  return idcg > 0 ? dcg / idcg : 0;
}

function recallAt(k: number, ranked: string[], relevant: Map<string, number>): number {
  if (relevant.size === 0) return 0;
  let hits = 0;
  for (const id of ranked.slice(0, k)) if (relevant.has(id)) hits++;
  return hits / relevant.size;
}

/** Mean nDCG@10 and recall@100 over the queries; `runs` maps query id -> ranked corpus ids. */
function evaluate(dataset: Dataset, runs: Map<string, string[]>) {
  let ndcg = 0;
  let recall = 0;
  for (const q of dataset.queries) {
    const ranked = runs.get(q.id) ?? [];
    const relevant = dataset.qrels.get(q.id)!;
    ndcg += ndcgAt(10, ranked, relevant);
    recall += recallAt(100, ranked, relevant);
  }
  const n = dataset.queries.length;
  return { 'ndcg@10': ndcg / n, 'recall@100': recall / n };
}

/** Chunk file names are `<corpus id>.txt`; a document split into several chunks counts once, at its best rank. */
function corpusIdsOf(passages: Array<{ fileName: string }>): string[] {
  const seen = new Set<string>();
  const out: string[] = [];
  for (const p of passages) {
    const id = p.fileName.replace(/\.txt$/, '');
    if (!seen.has(id)) {
      seen.add(id);
      out.push(id);
    }
  }
  return out;
}

// ---- phases --------------------------------------------------------------------------------------------

/** The per-document CPU work of ingestion without HTTP, queue or database (the ingestion baseline). */
async function pipelineBaseline(dataset: Dataset) {
  const embedder = createLocalEmbedder({ dimensions: 384, language: 'en' });
  const t0 = performance.now();
  let chunks = 0;
  for (const doc of dataset.corpus) {
    const extracted = await extractDocument('txt', Buffer.from(doc.text, 'utf8'));
    const prepared = await splitPages(extracted.pages, CHUNK_SIZE, 0);
    await embedder.embed(prepared.map((c) => c.text));
    for (const c of prepared) {
      termFrequencies(analyze(c.text, 'en'));
      countTokens(c.text);
    }
    chunks += prepared.length;
  }
  const seconds = (performance.now() - t0) / 1000;
  return { docsPerSecond: dataset.corpus.length / seconds, seconds, chunks };
}

async function ingest(service: BenchService, uploader: UploadClient, token: string, configId: string, dataset: Dataset, deadline: number) {
  const { app } = service;
  const db = app.deps.database.db;
  await uploader.load(dataset.corpus.map((doc) => ({ name: `${doc.id}.txt`, contentType: 'text/plain', bytes: Buffer.from(doc.text, 'utf8') })));
  const t0 = performance.now();
  const results = await uploader.upload({ origin: app.url, token, configId, concurrency: UPLOAD_CONCURRENCY, deadline });
  const uploadSeconds = (performance.now() - t0) / 1000;
  const duplicates = results.filter((r) => r.duplicate).length;
  log(`uploads done in ${uploadSeconds.toFixed(1)} s (${duplicates} duplicates); waiting for processing`);

  let lastLog = 0;
  for (;;) {
    const rows = await db
      .selectFrom('kb_documents')
      .select(['status'])
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('config_id', '=', configId)
      .groupBy('status')
      .execute();
    const counts = Object.fromEntries(rows.map((r) => [r.status, Number(r.n)])) as Record<string, number>;
    const processing = counts.processing ?? 0;
    if (processing === 0) {
      const seconds = (performance.now() - t0) / 1000;
      return { seconds, uploadSeconds, completed: counts.completed ?? 0, failed: counts.failed ?? 0, duplicates };
    }
    if (performance.now() - lastLog > 10_000) {
      lastLog = performance.now();
      log(`  ${counts.completed ?? 0} completed, ${counts.failed ?? 0} failed, ${processing} processing (${((performance.now() - t0) / 1000).toFixed(0)} s)`);
    }
    if (Date.now() > deadline) throw new Error(`ingestion did not finish before the time limit (${processing} documents still processing)`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

interface ModeRun {
  /** query id -> ranked corpus ids */
  runs: Map<string, string[]>;
  msPerQuery: number;
}

async function runMode(deps: AppDeps, config: KbConfigRow, dataset: Dataset, mode: Mode): Promise<ModeRun> {
  const runs = new Map<string, string[]>();
  const t0 = performance.now();
  for (const q of dataset.queries) {
    const { passages } = await retrieve(deps, config, q.text, EVAL_DEPTH, { mode });
    runs.set(q.id, corpusIdsOf(passages));
  }
  return { runs, msPerQuery: (performance.now() - t0) / dataset.queries.length };
}

/** Fuses lexical and vector candidate lists in memory with retrieve()'s formula, over a grid of settings. */
async function sweep(deps: AppDeps, config: KbConfigRow, dataset: Dataset, bm25: { 'ndcg@10': number; 'recall@100': number }) {
  const db = deps.database.db;
  const maxCandidates = 1000;
  const chunkToCorpus = new Map(
    (
      await db
        .selectFrom('kb_chunks')
        .innerJoin('kb_documents', 'kb_documents.id', 'kb_chunks.document_id')
        .select(['kb_chunks.id', 'kb_documents.file_name'])
        .where('kb_chunks.config_id', '=', config.id)
        .execute()
    ).map((r) => [r.id, r.file_name.replace(/\.txt$/, '')]),
  );
  const embedder = embedderFor(deps, config);
  const lists = new Map<string, { lexical: string[]; vector: string[] }>();
  for (const q of dataset.queries) {
    const lexical = (await lexicalSearch(db, config.id, analyze(q.text, config.language as 'en'), maxCandidates)).map((h) => h.chunkId);
    const embedded = (await embedder.embed([q.text])).vectors[0]!;
    const vector = isZeroVector(embedded)
      ? []
      : (
          await deps.vectorIndexes.search(db, {
            configId: config.id,
            version: config.serving_version,
            contentVersion: config.content_version,
            query: embedded,
            limit: maxCandidates,
          })
        ).map((h) => h.chunkId);
    lists.set(q.id, { lexical, vector });
  }
  const toCorpus = (chunks: string[]) => corpusIdsOf(chunks.map((c) => ({ fileName: chunkToCorpus.get(c) ?? c })));
  for (const candidates of [50, 100, 200, 500, 1000]) {
    for (const rrfK of [5, 10, 20, 40, 60, 100]) {
      for (const weight of [0.5, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 1]) {
        const runs = new Map<string, string[]>();
        for (const q of dataset.queries) {
          const { lexical, vector } = lists.get(q.id)!;
          const fused = new Map<string, number>();
          lexical.slice(0, candidates).forEach((id, rank) => fused.set(id, weight / (rrfK + rank + 1)));
          vector.slice(0, candidates).forEach((id, rank) => fused.set(id, (fused.get(id) ?? 0) + (1 - weight) / (rrfK + rank + 1)));
          const ranked = [...fused.entries()].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1)).slice(0, EVAL_DEPTH);
          runs.set(q.id, toCorpus(ranked.map(([id]) => id)));
        }
        const m = evaluate(dataset, runs);
        emit({
          bench: 'retrieval-sweep',
          dataset: 'scifact',
          candidates,
          rrf_k: rrfK,
          lexical_weight: weight,
          'ndcg@10': round(m['ndcg@10'], 4),
          'recall@100': round(m['recall@100'], 4),
          baseline: 'bm25-in-memory',
          'baseline_ndcg@10': round(bm25['ndcg@10'], 4),
          'baseline_recall@100': round(bm25['recall@100'], 4),
        });
      }
    }
  }
}

async function queryLatency(service: BenchService, token: string, config: KbConfigRow, dataset: Dataset) {
  const { app } = service;
  const ask = (query: string) =>
    expectStatus(
      call(app.url, 'POST', '/api/v1/knowledge-base/query', { token, body: { query, configId: config.id } }),
      200,
      'POST /api/v1/knowledge-base/query',
    );
  for (const q of dataset.queries.slice(0, LATENCY_WARMUP)) {
    await ask(q.text);
    await retrieve(app.deps, config, q.text, config.retrieval_depth);
  }
  // The steady state: the in-memory indexes, which the first queries started building, are ready.
  await app.deps.lexicalIndexes.idle();
  await app.deps.vectorIndexes.idle();
  // Paired and interleaved (the order alternates per query), so both sides see the same machine load.
  const http: number[] = [];
  const inProcess: number[] = [];
  let sources = 0;
  for (const [i, q] of dataset.queries.entries()) {
    for (const side of i % 2 === 0 ? (['http', 'in-process'] as const) : (['in-process', 'http'] as const)) {
      const t0 = performance.now();
      if (side === 'http') {
        const r = await ask(q.text);
        http.push(performance.now() - t0);
        sources += (r.json.data.sources as unknown[]).length;
      } else {
        await retrieve(app.deps, config, q.text, config.retrieval_depth);
        inProcess.push(performance.now() - t0);
      }
    }
  }
  return { http: latencySummary(http), inProcess: latencySummary(inProcess), meanSources: sources / dataset.queries.length };
}

// ---- main ----------------------------------------------------------------------------------------------

async function main() {
  const started = performance.now();
  const deadline = Date.now() + TIMEOUT_S * 1000;
  let service: BenchService | undefined;
  const watchdog = startWatchdog(TIMEOUT_S, log, async () => service?.cleanup());

  try {
    const dataset = loadScifact();
    const loadAtStart = loadAverage();
    const common = {
      bench: 'retrieval',
      dataset: 'scifact',
      queries: dataset.queries.length,
      corpus_docs: dataset.corpus.length,
      ...(dataset.subset ? { subset: true } : {}),
    };
    const load = () => ({ load_avg_1m_start: loadAtStart, load_avg_1m_end: loadAverage() });
    log(`SciFact: ${dataset.corpus.length} documents${dataset.subset ? ' (subset)' : ''}, ${dataset.queries.length} test queries`);

    // Baseline: plain BM25 in memory over the same title + text.
    const bm25Index = new Bm25Index({ k1: BM25_K1, b: BM25_B, language: 'en' });
    for (const doc of dataset.corpus) bm25Index.add(doc.id, doc.text);
    const bm25Runs = new Map(dataset.queries.map((q) => [q.id, bm25Index.search(q.text, EVAL_DEPTH).map((h) => h.id)]));
    const bm25 = evaluate(dataset, bm25Runs);
    log(`BM25 in memory: nDCG@10 ${bm25['ndcg@10'].toFixed(4)}, recall@100 ${bm25['recall@100'].toFixed(4)}`);

    log('ingestion baseline: the same per-document work in-process, no HTTP/queue/database');
    const pipeline = await pipelineBaseline(dataset);
    log(`  ${pipeline.docsPerSecond.toFixed(0)} docs/s (${pipeline.seconds.toFixed(1)} s, ${pipeline.chunks} chunks)`);

    service = await startBenchService(log, { JOB_CONCURRENCY: String(JOB_CONCURRENCY) });
    const { app } = service;
    log(`service on ${app.url}`);
    const token = await signUp(app.url);
    const configId = await createKnowledgeBase(app.url, token, {
      name: 'SciFact',
      chunkSize: CHUNK_SIZE,
      chunkOverlap: 0,
      retrievalDepth: RETRIEVAL_DEPTH,
      language: 'en',
      embedding: { provider: 'local' },
    });

    log(`ingesting ${dataset.corpus.length} documents through the upload endpoint (${UPLOAD_CONCURRENCY} in flight, ${JOB_CONCURRENCY} job workers)`);
    const uploader = forkUploadClient();
    service.onCleanup('stop the upload client', () => uploader.close());
    const ingestion = await profiled('retrieval-ingest.cpuprofile', () => ingest(service!, uploader, token, configId, dataset, deadline));
    const ingestRate = ingestion.completed / ingestion.seconds;
    log(`  ${ingestion.completed} completed, ${ingestion.failed} failed in ${ingestion.seconds.toFixed(1)} s: ${ingestRate.toFixed(1)} docs/s`);
    const chunkCount = Number(
      (await sql<{ n: number }>`select count(*)::int as n from kb_chunks where config_id = ${configId}`.execute(app.deps.database.db)).rows[0]?.n ?? 0,
    );
    emit({
      ...common,
      metric: 'ingest_docs_per_second',
      value: round(ingestRate, 2),
      baseline: 'pipeline-in-process-no-db',
      baseline_value: round(pipeline.docsPerSecond, 2),
      ratio: round(ingestRate / pipeline.docsPerSecond, 4),
      ratio_definition: 'ours / baseline (higher is better)',
      target_ratio: TARGET_INGEST_RATIO,
      meets_target: ingestRate / pipeline.docsPerSecond >= TARGET_INGEST_RATIO,
      seconds: round(ingestion.seconds, 2),
      upload_seconds: round(ingestion.uploadSeconds, 2),
      completed: ingestion.completed,
      failed: ingestion.failed,
      duplicates: ingestion.duplicates,
      chunks: chunkCount,
      upload_concurrency: UPLOAD_CONCURRENCY,
      job_concurrency: JOB_CONCURRENCY,
      database: service.databaseKind,
      ...load(),
    });
    if (ingestion.failed > 0 || ingestion.completed + ingestion.duplicates < dataset.corpus.length) {
      log(`warning: ${ingestion.failed} documents failed; quality figures are computed over what was ingested`);
    }
    if (INGEST_ONLY) return;

    // The configuration as retrieve() sees it after ingestion (content_version moved on).
    const config = await findConfigById(app.deps.database.db, configId);
    if (!config) throw new Error('the knowledge base disappeared');

    const perMode = new Map<Mode, ReturnType<typeof evaluate> & { msPerQuery: number }>();
    for (const mode of MODES) {
      const run = await runMode(app.deps, config, dataset, mode);
      const m = evaluate(dataset, run.runs);
      perMode.set(mode, { ...m, msPerQuery: run.msPerQuery });
      log(`${mode}: nDCG@10 ${m['ndcg@10'].toFixed(4)}, recall@100 ${m['recall@100'].toFixed(4)} (${run.msPerQuery.toFixed(1)} ms/query in-process)`);
    }
    const lexical = perMode.get('lexical')!;
    for (const mode of MODES) {
      const m = perMode.get(mode)!;
      for (const metric of ['ndcg@10', 'recall@100'] as const) {
        emit({
          ...common,
          metric,
          mode,
          value: round(m[metric], 4),
          baseline: 'bm25-in-memory',
          baseline_value: round(bm25[metric], 4),
          ratio: round(m[metric] / bm25[metric], 4),
          ratio_definition: 'ours / baseline (higher is better)',
          published_bm25: metric === 'ndcg@10' ? PUBLISHED_BM25_NDCG10 : null,
          ...(metric === 'ndcg@10' ? { target: TARGET_NDCG10, meets_target: m[metric] >= TARGET_NDCG10 } : {}),
          ...(mode === 'hybrid' ? { lexical_value: round(lexical[metric], 4), hybrid_not_below_lexical: m[metric] >= lexical[metric] } : {}),
          depth: EVAL_DEPTH,
          lexical_weight: LEXICAL_WEIGHT,
          rrf_k: RRF_K,
          candidates: CANDIDATES,
          embedding: `${config.embedding.model}/${config.embedding.dimensions}`,
          ms_per_query_in_process: round(m.msPerQuery, 2),
          database: service.databaseKind,
        });
      }
    }

    log(`query latency: ${dataset.queries.length} queries over HTTPS and in-process, interleaved (after ${LATENCY_WARMUP} warm-up queries each)`);
    const latency = await profiled('retrieval-latency.cpuprofile', () => queryLatency(service!, token, config, dataset));
    log(
      `  HTTPS p50 ${latency.http.p50.toFixed(1)} ms p99 ${latency.http.p99.toFixed(1)} ms; ` +
        `in-process p50 ${latency.inProcess.p50.toFixed(1)} ms p99 ${latency.inProcess.p99.toFixed(1)} ms`,
    );
    for (const [metric, key] of [
      ['query_p50_ms', 'p50'],
      ['query_p99_ms', 'p99'],
    ] as const) {
      emit({
        ...common,
        metric,
        route: 'POST /api/v1/knowledge-base/query',
        value: round(latency.http[key], 2),
        baseline: 'retrieve-in-process',
        baseline_value: round(latency.inProcess[key], 2),
        ratio: round(latency.inProcess[key] / latency.http[key], 4),
        ratio_definition: 'baseline / ours (higher is better)',
        target_ms: TARGET_QUERY_MS[key],
        meets_target: latency.http[key] <= TARGET_QUERY_MS[key],
        requests: latency.http.count,
        concurrency: 1,
        retrieval_depth: config.retrieval_depth,
        mean_sources: round(latency.meanSources, 1),
        answer: 'extractive (no language model configured)',
        database: service.databaseKind,
        ...load(),
      });
    }

    if (SWEEP) {
      log('sweep: fusing the lexical and vector candidate lists over a grid of settings');
      await sweep(app.deps, config, dataset, bm25);
    }
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
