/**
 * PDF ingestion benchmark: `npm run bench:ingest`.
 *
 * Pages per second from upload to `completed` on a set of real PDFs, against extraction alone with the same
 * parser (`extractDocument('pdf', bytes)`, adapters/outbound/parsers/extract.ts) over the same files in the same run;
 * plus peak memory.
 *
 * The PDFs: every *.pdf and *.pdf.gz (Debian compresses documentation; gunzipped here) under BENCH_PDF_DIR
 * if set, else under /usr/share/doc. Identical contents count once; files over the free plan's upload limit
 * (10 MiB) are skipped. Files are taken round-robin across the top-level folders (packages), so one
 * package's 40 translations do not crowd out the rest, up to BENCH_MAX_FILES files and BENCH_MAX_PAGES pages.
 * When none is found, ~30 multi-page PDFs are generated with pdf-lib (`"corpus":"generated"`).
 *
 * Phases, in this order:
 *   1. baseline, in a child process of its own (so that memory figures do not mix): one small PDF extracted
 *      once as a warm-up (not timed), then each PDF through extractDocument, one after the other; run again in
 *      a new child after phase 2, and pages/s is the mean of the two passes (the memory figures are the first's);
 *   2. end to end, after the same warm-up through the service (the smallest PDF uploaded and processed in a
 *      knowledge base of its own): the service as `npm start` runs it, precompiled, in a process of its own
 *      (service-process.ts: embedded PGlite in a temp DATA_DIR, or a scratch database on DATABASE_URL's server),
 *      one owner, one knowledge base with default settings; every PDF
 *      is uploaded through POST /api/v1/knowledge-base/documents over HTTPS (BENCH_UPLOAD_CONCURRENCY in flight,
 *      from a child process of its own: upload-client.ts) and GET /api/v1/knowledge-base/documents is polled
 *      every 100 ms until none is `processing`. Time runs from the first upload to that poll; pages = the pageCount of
 *      the completed documents.
 * Memory: process RSS sampled every 50 ms during each phase (peak), and the lifetime peak of the process measured
 * (the baseline's child: resourceUsage().maxRSS; the service's process: VmHWM). End to end, that is the service's
 * process alone: this process's PDFs, page counting and polling are not in it.
 *
 * stdout: one JSON line per figure, nothing else (progress on stderr):
 *   {"bench":"ingest","corpus":"system-pdfs"|"pdf-dir"|"generated","metric":"pages_per_second","value":e2e,
 *    "baseline":"extraction-only","baseline_value":...,"ratio":e2e/baseline,...}
 *   {"bench":"ingest",...,"metric":"peak_rss_mb"|"max_rss_mb","value":e2e phase,"baseline":"extraction-only",...}
 *
 * Knobs (environment):
 *   BENCH_PDF_DIR              folder searched (recursively) for PDFs instead of /usr/share/doc
 *   BENCH_MAX_FILES            at most this many PDFs, default 40 (1..500)
 *   BENCH_MAX_PAGES            at most this many pages in all, default 2000 (10..100000)
 *   BENCH_UPLOAD_CONCURRENCY   uploads in flight, default 4 (1..64)
 *   BENCH_JOB_CONCURRENCY      the service's JOB_CONCURRENCY, default 4 (its own default; 1..32)
 *   BENCH_TIMEOUT_S            hard bound on the whole run, default 600 (30..3600): then it cleans up and exits 1
 *   BENCH_GENERATE=1           use generated PDFs even when real ones are found
 *   DATABASE_URL               optional postgres:// URL of a server on which a scratch database is created and dropped
 */
import { fork } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, realpathSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { basename, join, relative, sep } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { gunzipSync } from 'node:zlib';
import { getDocumentProxy } from 'unpdf';
import { extractDocument } from '../../adapters/outbound/parsers/extract.ts';
import { ParseError } from '../../adapters/outbound/parsers/parse-error.ts';
import { PLAN_RULES } from '../../schema/plans.ts';
import {
  boolEnv,
  call,
  createKnowledgeBase,
  createLog,
  emit,
  expectStatus,
  intEnv,
  loadAverage,
  mib,
  round,
  signUp,
  startRssSampler,
  uploadDocument,
  startWatchdog,
} from './bench-kit.ts';
import { processMemory, startServiceProcess, type ServiceProcess } from './service-process.ts';
import { forkUploadClient, type UploadClient } from './upload-client.ts';

const PDF_DIR = process.env.BENCH_PDF_DIR || undefined;
const DEFAULT_DIR = '/usr/share/doc';
const MAX_FILES = intEnv('BENCH_MAX_FILES', 40, 1, 500);
const MAX_PAGES = intEnv('BENCH_MAX_PAGES', 2000, 10, 100_000);
const UPLOAD_CONCURRENCY = intEnv('BENCH_UPLOAD_CONCURRENCY', 4, 1, 64);
const JOB_CONCURRENCY = intEnv('BENCH_JOB_CONCURRENCY', 4, 1, 32);
const TIMEOUT_S = intEnv('BENCH_TIMEOUT_S', 600, 30, 3600);
const FORCE_GENERATE = boolEnv('BENCH_GENERATE');
const RSS_SAMPLE_MS = 50;
/** Uploads go through the free plan's per-file limit. */
const MAX_FILE_BYTES = PLAN_RULES.free.uploadBytes;
/** Compressed files larger than this are not even read. */
const MAX_READ_BYTES = 20 * 1024 * 1024;

const log = createLog('ingest');

interface Pdf {
  name: string;
  source: string;
  bytes: Uint8Array;
  /** numPages as pdf.js reports it on opening (0 when it cannot be opened). */
  pages: number;
}

// ---- finding real PDFs ----------------------------------------------------------------------------------

function listPdfFiles(root: string): string[] {
  const out: string[] = [];
  const walk = (dir: string, depth: number) => {
    if (depth > 12) return;
    let entries;
    try {
      entries = readdirSync(dir, { withFileTypes: true });
    } catch {
      return;
    }
    for (const entry of entries) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path, depth + 1);
      else if ((entry.isFile() || entry.isSymbolicLink()) && /\.pdf(\.gz)?$/i.test(entry.name)) out.push(path);
    }
  };
  walk(root, 0);
  return out.sort();
}

async function countPages(bytes: Uint8Array): Promise<number> {
  try {
    const pdf = await getDocumentProxy(new Uint8Array(bytes), { verbosity: 0, stopAtErrors: false });
    const n = pdf.numPages;
    await pdf.destroy().catch(() => {});
    return n;
  } catch {
    return 0;
  }
}

async function findRealPdfs(root: string): Promise<{ pdfs: Pdf[]; skipped: Record<string, number> }> {
  const skipped = { unreadable: 0, not_pdf: 0, too_large: 0, duplicate: 0, over_page_cap: 0 };
  const byGroup = new Map<string, string[]>();
  const seenPaths = new Set<string>();
  for (const path of listPdfFiles(root)) {
    let real: string;
    try {
      real = realpathSync(path);
      if (!statSync(real).isFile()) continue;
    } catch {
      skipped.unreadable++;
      continue;
    }
    if (seenPaths.has(real)) continue;
    seenPaths.add(real);
    const group = relative(root, path).split(sep)[0] ?? '';
    if (!byGroup.has(group)) byGroup.set(group, []);
    byGroup.get(group)!.push(real);
  }
  // Round-robin across top-level folders.
  const groups = [...byGroup.keys()].sort().map((g) => byGroup.get(g)!);
  const ordered: string[] = [];
  for (let i = 0; groups.some((g) => i < g.length); i++) for (const g of groups) if (i < g.length) ordered.push(g[i]!);

  const pdfs: Pdf[] = [];
  const hashes = new Set<string>();
  let pages = 0;
  for (const path of ordered) {
    if (pdfs.length >= MAX_FILES) break;
    let bytes: Uint8Array;
    try {
      if (statSync(path).size > MAX_READ_BYTES) {
        skipped.too_large++;
        continue;
      }
      const raw = readFileSync(path);
      bytes = path.toLowerCase().endsWith('.gz') ? gunzipSync(raw, { maxOutputLength: MAX_FILE_BYTES + 1 }) : raw;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ERR_BUFFER_TOO_LARGE') skipped.too_large++;
      else skipped.unreadable++;
      continue;
    }
    if (bytes.byteLength > MAX_FILE_BYTES) {
      skipped.too_large++;
      continue;
    }
    if (Buffer.from(bytes.subarray(0, 5)).toString('latin1') !== '%PDF-') {
      skipped.not_pdf++;
      continue;
    }
    const hash = createHash('sha256').update(bytes).digest('hex');
    if (hashes.has(hash)) {
      skipped.duplicate++;
      continue;
    }
    const n = await countPages(bytes);
    if (pages + n > MAX_PAGES) {
      skipped.over_page_cap++;
      continue;
    }
    hashes.add(hash);
    pages += n;
    pdfs.push({ name: basename(path).replace(/\.gz$/i, ''), source: path, bytes, pages: n });
  }
  return { pdfs, skipped };
}

// ---- generated fallback ---------------------------------------------------------------------------------

const WORDS = (
  'the knowledge base service extracts text from every page of a document and splits it into chunks that are embedded ' +
  'and indexed for retrieval while the owner watches the processing status change from uploaded to searchable ' +
  'benchmark measures pages per second memory usage latency throughput parser database vector lexical ranking ' +
  'abstract method result conclusion experiment analysis protein cell patient treatment network model energy'
).split(' ');

async function generatePdfs(): Promise<Pdf[]> {
  const { PDFDocument, StandardFonts } = await import('pdf-lib');
  let seed = 0x2545f491;
  const random = () => {
    seed ^= seed << 13;
    seed ^= seed >>> 17;
    seed ^= seed << 5;
    return (seed >>> 0) / 0x100000000;
  };
  const pdfs: Pdf[] = [];
  let total = 0;
  for (let d = 0; d < 30 && pdfs.length < MAX_FILES; d++) {
    const pageCount = Math.min(5 + Math.floor(random() * 56), MAX_PAGES - total);
    if (pageCount <= 0) break;
    const doc = await PDFDocument.create();
    const font = await doc.embedFont(StandardFonts.Helvetica);
    for (let p = 0; p < pageCount; p++) {
      const page = doc.addPage([595, 842]);
      page.drawText(`Generated document ${d + 1}, page ${p + 1}`, { x: 50, y: 800, size: 14, font });
      for (let line = 0; line < 45; line++) {
        const words: string[] = [];
        for (let w = 0; w < 12; w++) words.push(WORDS[Math.floor(random() * WORDS.length)]!);
        page.drawText(words.join(' '), { x: 50, y: 770 - line * 16, size: 10, font });
      }
    }
    const bytes = await doc.save();
    pdfs.push({ name: `generated-${String(d + 1).padStart(2, '0')}.pdf`, source: 'pdf-lib', bytes, pages: pageCount });
    total += pageCount;
  }
  return pdfs;
}

// ---- phases --------------------------------------------------------------------------------------------

interface BaselineResult {
  seconds: number;
  pages: number;
  ok: number;
  failed: string[];
  rss: { startBytes: number; peakBytes: number; samples: number };
  maxRssBytes: number;
}

/** Runs in the child process: a warm-up on the smallest PDF, then every PDF through extractDocument. */
async function extractionBaseline(pdfs: Pdf[]): Promise<BaselineResult> {
  const smallest = [...pdfs].sort((a, b) => a.bytes.byteLength - b.bytes.byteLength)[0];
  if (smallest) await extractDocument('pdf', smallest.bytes).catch(() => undefined);
  const sampler = startRssSampler(RSS_SAMPLE_MS);
  const t0 = performance.now();
  let pages = 0;
  let ok = 0;
  const failed: string[] = [];
  for (const pdf of pdfs) {
    try {
      const doc = await extractDocument('pdf', pdf.bytes);
      pages += doc.pageCount ?? 0;
      ok++;
    } catch (error) {
      failed.push(`${pdf.name}: ${error instanceof ParseError ? error.reason : String(error)}`);
    }
  }
  const seconds = (performance.now() - t0) / 1000;
  const rss = sampler.stop();
  return { seconds, pages, ok, failed, rss, maxRssBytes: process.resourceUsage().maxRSS * 1024 };
}

/**
 * The baseline runs in a child process of its own (this file, forked under the tsx loader), so that its
 * memory figures are its own and the end-to-end phase does not inherit its heap (and vice versa).
 */
function extractionBaselineInChild(pdfs: Pdf[], deadline: number): Promise<BaselineResult> {
  const tsxLoader = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href;
  const child = fork(fileURLToPath(import.meta.url), [], {
    execPath: process.execPath,
    execArgv: ['--import', tsxLoader],
    env: { ...process.env, BENCH_INGEST_CHILD: '1' },
    stdio: ['ignore', 2, 2, 'ipc'],
    serialization: 'advanced',
  });
  return new Promise<BaselineResult>((resolve, reject) => {
    let settled = false;
    const finish = (fn: () => void) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      fn();
    };
    const timer = setTimeout(
      () => {
        child.kill('SIGKILL');
        finish(() => reject(new Error('the extraction baseline did not finish before the time limit; killed it')));
      },
      Math.max(1_000, deadline - Date.now()),
    );
    child.once('message', (message: { result?: BaselineResult; error?: string }) => {
      if (child.connected) child.disconnect();
      finish(() => (message.result ? resolve(message.result) : reject(new Error(`extraction baseline: ${message.error ?? 'no result'}`))));
    });
    child.once('error', (error) => finish(() => reject(error)));
    child.once('exit', (code, signal) => finish(() => reject(new Error(`extraction baseline exited early (code ${code}, signal ${signal})`))));
    child.send({ pdfs });
  });
}

interface ListedDocument {
  fileName: string;
  status: string;
  pageCount: number | null;
  error: string | null;
  chunkCount: number;
}

/** The knowledge base's documents as the API lists them (what both phases poll). */
async function documentsOf(origin: string, token: string, configId: string): Promise<ListedDocument[]> {
  const r = await expectStatus(call(origin, 'GET', `/api/v1/knowledge-base/documents?configId=${configId}`, { token }), 200, 'list documents');
  return r.json.data.documents as ListedDocument[];
}

/** Uploads one PDF as its own owner and waits until it leaves `processing`. */
async function warmUp(service: ServiceProcess, pdf: Pdf, deadline: number) {
  const { url } = service;
  const token = await signUp(url);
  const configId = await createKnowledgeBase(url, token, { name: 'PDF ingestion bench warm-up' });
  await uploadDocument(url, token, configId, `warm-up-${pdf.name}`, 'application/pdf', pdf.bytes);
  while (Date.now() < deadline) {
    if (!(await documentsOf(url, token, configId)).some((d) => d.status === 'processing')) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error('the warm-up document did not finish before the time limit');
}

async function endToEnd(service: ServiceProcess, uploader: UploadClient, pdfs: Pdf[], deadline: number) {
  const { url } = service;
  const token = await signUp(url);
  const configId = await createKnowledgeBase(url, token, { name: 'PDF ingestion bench' });
  await uploader.load(pdfs.map((pdf, i) => ({ name: `${String(i + 1).padStart(3, '0')}-${pdf.name}`, contentType: 'application/pdf', bytes: pdf.bytes })));
  const sampler = startRssSampler(RSS_SAMPLE_MS, () => processMemory(service.pid).rssBytes);
  const t0 = performance.now();
  const uploads = await uploader.upload({ origin: url, token, configId, concurrency: UPLOAD_CONCURRENCY, deadline });
  const uploadSeconds = (performance.now() - t0) / 1000;
  log(`  uploads done in ${uploadSeconds.toFixed(1)} s; waiting for processing`);
  let lastLog = performance.now();
  for (;;) {
    const documents = await documentsOf(url, token, configId);
    const processing = documents.filter((d) => d.status === 'processing').length;
    if (processing === 0) {
      const seconds = (performance.now() - t0) / 1000;
      const rss = sampler.stop();
      const completed = documents.filter((d) => d.status === 'completed');
      const failed = documents.filter((d) => d.status === 'failed');
      return {
        seconds,
        uploadSeconds,
        duplicates: uploads.filter((u) => u.duplicate).length,
        completed: completed.length,
        pages: completed.reduce((s, d) => s + (d.pageCount ?? 0), 0),
        chunks: completed.reduce((s, d) => s + d.chunkCount, 0),
        failed: failed.map((d) => `${d.fileName}: ${d.error ?? 'failed'}`),
        rss,
        maxRssBytes: processMemory(service.pid).peakBytes,
      };
    }
    if (performance.now() - lastLog > 10_000) {
      lastLog = performance.now();
      log(`  ${documents.length - processing}/${documents.length} done (${((performance.now() - t0) / 1000).toFixed(0)} s)`);
    }
    if (Date.now() > deadline) {
      sampler.stop();
      throw new Error(`ingestion did not finish before the time limit (${processing} documents still processing)`);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

// ---- main ----------------------------------------------------------------------------------------------

async function main() {
  const started = performance.now();
  const deadline = Date.now() + TIMEOUT_S * 1000;
  let service: ServiceProcess | undefined;
  const watchdog = startWatchdog(TIMEOUT_S, log, async () => service?.cleanup());

  const loadAtStart = loadAverage();
  try {
    let corpus: 'pdf-dir' | 'system-pdfs' | 'generated';
    let pdfs: Pdf[] = [];
    let skipped: Record<string, number> = {};
    const root = PDF_DIR ?? DEFAULT_DIR;
    if (PDF_DIR && !existsSync(PDF_DIR)) throw new Error(`BENCH_PDF_DIR ${PDF_DIR} does not exist`);
    if (!FORCE_GENERATE) {
      log(`looking for PDFs under ${root} (at most ${MAX_FILES} files, ${MAX_PAGES} pages)`);
      ({ pdfs, skipped } = await findRealPdfs(root));
    }
    if (pdfs.length > 0) {
      corpus = PDF_DIR ? 'pdf-dir' : 'system-pdfs';
    } else {
      if (PDF_DIR) throw new Error(`no usable PDF under BENCH_PDF_DIR ${PDF_DIR}`);
      log(FORCE_GENERATE ? 'BENCH_GENERATE=1: generating PDFs with pdf-lib' : 'no PDF found: generating PDFs with pdf-lib');
      corpus = 'generated';
      pdfs = await generatePdfs();
    }
    const totalBytes = pdfs.reduce((s, p) => s + p.bytes.byteLength, 0);
    const declaredPages = pdfs.reduce((s, p) => s + p.pages, 0);
    log(`${pdfs.length} PDFs, ${declaredPages} pages, ${mib(totalBytes)} MiB (${corpus}; skipped: ${JSON.stringify(skipped)})`);
    for (const p of pdfs) log(`  ${p.pages.toString().padStart(5)} pages  ${(p.bytes.byteLength / 1024).toFixed(0).padStart(6)} KiB  ${p.source}`);

    log('baseline: extractDocument over every PDF, one after the other, in a child process');
    const base = await extractionBaselineInChild(pdfs, deadline);
    const basePps = base.pages / base.seconds;
    log(
      `  ${base.ok} extracted, ${base.failed.length} failed, ${base.pages} pages in ${base.seconds.toFixed(2)} s: ${basePps.toFixed(1)} pages/s; peak RSS ${mib(base.rss.peakBytes)} MiB`,
    );
    for (const f of base.failed) log(`    failed: ${f}`);

    service = await startServiceProcess(log, { JOB_CONCURRENCY: String(JOB_CONCURRENCY) });
    log(`service on ${service.url} (pid ${service.pid}); uploading ${pdfs.length} PDFs (${UPLOAD_CONCURRENCY} in flight, ${JOB_CONCURRENCY} job workers)`);
    // The same warm-up as the baseline's, in the service: the smallest PDF through the whole pipeline, in a
    // knowledge base of its own, before the clock starts (the parsing worker loads its modules on first use).
    const smallest = [...pdfs].sort((a, b) => a.bytes.byteLength - b.bytes.byteLength)[0]!;
    await warmUp(service, smallest, deadline);
    const uploader = forkUploadClient();
    service.onCleanup('stop the upload client', () => uploader.close());
    const e2e = await endToEnd(service, uploader, pdfs, deadline);
    const pps = e2e.pages / e2e.seconds;
    log(
      `  ${e2e.completed} completed, ${e2e.failed.length} failed, ${e2e.pages} pages in ${e2e.seconds.toFixed(2)} s: ${pps.toFixed(1)} pages/s; peak RSS ${mib(e2e.rss.peakBytes)} MiB`,
    );
    for (const f of e2e.failed) log(`    failed: ${f}`);
    // The baseline again, now that the end-to-end phase is over (the service idles): this machine's speed drifts by
    // half within minutes, and the mean of a pass before and one after cancels a steady drift between them.
    // Skipped (the first pass alone is the baseline) when the time left could not fit it twice over.
    const roomForAfter = deadline - Date.now() > 2 * base.seconds * 1000 + 10_000;
    const after = roomForAfter ? await extractionBaselineInChild(pdfs, deadline) : undefined;
    const afterPps = after ? after.pages / after.seconds : undefined;
    if (after && afterPps !== undefined)
      log(`baseline again, after the end-to-end phase: ${after.pages} pages in ${after.seconds.toFixed(2)} s: ${afterPps.toFixed(1)} pages/s`);
    else log('no time left for the baseline after the end-to-end phase: the first pass is the baseline');
    const basePpsMean = afterPps === undefined ? basePps : (basePps + afterPps) / 2;

    const common = {
      bench: 'ingest',
      corpus,
      docs: pdfs.length,
      bytes: totalBytes,
      upload_concurrency: UPLOAD_CONCURRENCY,
      job_concurrency: JOB_CONCURRENCY,
      database: service.databaseKind,
      load_avg_1m_start: loadAtStart,
      load_avg_1m_end: loadAverage(),
    };
    emit({
      ...common,
      metric: 'pages_per_second',
      value: round(pps, 2),
      baseline: 'extraction-only',
      baseline_value: round(basePpsMean, 2),
      ratio: round(pps / basePpsMean, 4),
      ratio_definition: 'ours / baseline (higher is better); the baseline is the mean of its passes before and after ours',
      baseline_before: round(basePps, 2),
      baseline_after: afterPps === undefined ? null : round(afterPps, 2),
      pages: e2e.pages,
      completed: e2e.completed,
      failed: e2e.failed.length,
      duplicates: e2e.duplicates,
      chunks: e2e.chunks,
      seconds: round(e2e.seconds, 3),
      upload_seconds: round(e2e.uploadSeconds, 3),
      baseline_pages: base.pages,
      baseline_failed: base.failed.length,
      baseline_seconds: round(base.seconds, 3),
      baseline_after_seconds: after ? round(after.seconds, 3) : null,
      failed_documents: e2e.failed.map((f) => f.slice(0, 160)),
    });
    emit({
      ...common,
      metric: 'peak_rss_mb',
      value: mib(e2e.rss.peakBytes),
      baseline: 'extraction-only',
      baseline_value: mib(base.rss.peakBytes),
      ratio: round(base.rss.peakBytes / e2e.rss.peakBytes, 4),
      ratio_definition: 'baseline / ours (higher is better)',
      start_rss_mb: mib(e2e.rss.startBytes),
      baseline_start_rss_mb: mib(base.rss.startBytes),
      sample_interval_ms: RSS_SAMPLE_MS,
      samples: e2e.rss.samples,
      note: "the service process's RSS sampled during the phase (it holds its embedded database too)",
    });
    emit({
      ...common,
      metric: 'max_rss_mb',
      value: mib(e2e.maxRssBytes),
      baseline: 'extraction-only',
      baseline_value: mib(base.maxRssBytes),
      ratio: round(base.maxRssBytes / e2e.maxRssBytes, 4),
      ratio_definition: 'baseline / ours (higher is better)',
      note: 'lifetime peak of the service process (VmHWM: start-up, warm-up and the run) vs of the baseline child process (resourceUsage().maxRSS)',
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

if (process.env.BENCH_INGEST_CHILD === '1' && typeof process.send === 'function') {
  const send = process.send.bind(process);
  process.once('message', (message: { pdfs: Pdf[] }) => {
    extractionBaseline(message.pdfs).then(
      (result) => send({ result }),
      (error: unknown) => send({ error: error instanceof Error ? error.message : String(error) }),
    );
  });
} else {
  await main();
}
