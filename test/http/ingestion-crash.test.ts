// Issue requirement: "Kill the process mid-ingestion and restart: every document ends completed or failed, none
// stays processing". The real service runs as a child process (`npm start`'s build, server/start.mjs) on its own data directory and
// database; it is SIGKILLed while documents are being ingested and started again on the same data. The restarted
// process is then stopped gracefully (SIGTERM), also mid-ingestion, and started a third time: a planned restart must
// not fail documents either. At the end the database itself is checked: no document was ingested twice.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Database } from '../../db/database.ts';
import { extractDocument } from '../../adapters/outbound/parsers/extract.ts';
import { splitPages } from '../../adapters/outbound/parsers/prepare.ts';
import { createChildStorage, startChildServer, type ChildServer, type ChildStorage } from '../helpers/child-server.ts';
import { multipartBody } from '../helpers/test-app.ts';
import { makePdf } from '../helpers/documents.ts';

const CHUNK_SIZE = 300;
const CHUNK_OVERLAP = 40;
/** Short job lease (the default is 60 s) so the jobs the crash left `running` are claimable again soon after the restart. */
const JOB_LEASE_MS = '4000';
const RECOVERY_TIMEOUT_MS = 45_000;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const WORDS = (
  'inverter battery module bracket cable voltage current meter sensor firmware gateway roof tilt shade cell string ' +
  'panel frame glass junction fuse breaker ground clamp rail bolt torque humidity dust snow wind load report manual ' +
  'install inspect replace measure calibrate monitor export import tariff invoice warranty service audit schedule'
).split(' ');

/** Deterministic filler text, different for every seed (uploads are de-duplicated by content hash). */
function prose(seed: number, words: number): string {
  let x = (seed * 2654435761) >>> 0 || 1;
  const out: string[] = [];
  for (let i = 0; i < words; i++) {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    out.push(WORDS[x % WORDS.length]!);
  }
  return out.join(' ');
}

interface Upload {
  fileName: string;
  kind: 'pdf' | 'txt';
  bytes: Buffer;
}

async function makeUploads(): Promise<Upload[]> {
  const uploads: Upload[] = [];
  for (let d = 0; d < 25; d++) {
    if (d % 3 === 2) {
      const paragraphs = Array.from({ length: 120 }, (_, p) => `Section ${d}.${p}. ${prose(d * 1000 + p, 40)}.`);
      if (d === 2) paragraphs.splice(7, 0, 'The heliostat calibration procedure requires a clear sky and a level mirror.');
      uploads.push({ fileName: `notes-${d}.txt`, kind: 'txt', bytes: Buffer.from(paragraphs.join('\n\n')) });
    } else {
      const pages = Array.from({ length: 20 }, (_, p) => Array.from({ length: 38 }, (_, l) => `${d}-${p}-${l} ${prose(d * 100_000 + p * 100 + l, 12)}`));
      if (d === 0) pages[3]![5] = 'The pyranometer must be cleaned every week to keep irradiance readings accurate.';
      uploads.push({ fileName: `manual-${d}.pdf`, kind: 'pdf', bytes: await makePdf(pages) });
    }
  }
  return uploads;
}

interface ListedDocument {
  id: string;
  fileName: string;
  status: 'processing' | 'completed' | 'failed';
  stage: string;
  error: string | null;
  chunkCount: number;
}

let dataDir = '';
let storage: ChildStorage | undefined;
let server: ChildServer | undefined;

beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), 'cis-crash-'));
  storage = await createChildStorage('cis_crash');
});

afterAll(async () => {
  await server?.crash().catch(() => {});
  await storage?.drop();
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

function start(): Promise<ChildServer> {
  return startChildServer({
    dataDir,
    env: {
      ...storage!.env,
      // Fixed key: the restarted process must read what the first one stored.
      ENCRYPTION_KEY: Buffer.alloc(32, 7).toString('base64'),
      RATE_LIMIT_UPLOAD: '1000',
      RATE_LIMIT_DEFAULT: '100000',
      RATE_LIMIT_KB_QUERY: '1000',
      LOG_LEVEL: 'info',
      JOB_CONCURRENCY: '2',
      JOB_LEASE_MS,
    },
  });
}

async function listDocuments(token: string, configId: string): Promise<ListedDocument[]> {
  const res = await server!.request('GET', `/api/v1/knowledge-base/documents?configId=${configId}`, { token });
  if (res.status !== 200) throw new Error(`list documents: ${res.status} ${res.text}`);
  return res.body.data.documents as ListedDocument[];
}

const tally = (docs: ListedDocument[]) => ({
  processing: docs.filter((d) => d.status === 'processing').length,
  completed: docs.filter((d) => d.status === 'completed').length,
  failed: docs.filter((d) => d.status === 'failed').length,
});

/**
 * Polls until the ingestion is visibly in progress: more than `completedBefore` documents completed while others
 * are still processing. Fails if everything finished first (the interruption would then test nothing).
 */
async function waitUntilMidIngestion(token: string, configId: string, completedBefore: number): Promise<ListedDocument[]> {
  for (const deadline = Date.now() + 30_000; ; ) {
    const docs = await listDocuments(token, configId);
    const t = tally(docs);
    if (t.completed > completedBefore && t.processing >= 1) return docs;
    if (t.processing === 0) throw new Error(`every document finished before the process could be stopped mid-ingestion: ${JSON.stringify(t)}`);
    if (Date.now() > deadline) throw new Error(`no progress within 30 s: ${JSON.stringify(t)}`);
    await sleep(25);
  }
}

/** Runs `fn` on the database while no child is running (PGlite: on a copy of the data directory). */
async function inspect<T>(fn: (database: Database) => Promise<T>): Promise<T> {
  expect(server, 'inspect() needs the child stopped').toBeUndefined();
  return storage!.inspect(dataDir, fn);
}

/** Who holds the jobs that are running (the queue's worker ids). */
const runningLockers = (database: Database) =>
  sql<{ locked_by: string | null }>`select distinct locked_by from jobs where kind = 'kb.ingest' and status = 'running'`
    .execute(database.db)
    .then((r) => r.rows.map((row) => row.locked_by));

const jobStatuses = (database: Database) =>
  sql<{ status: string; n: number }>`select status, count(*)::int as n from jobs where kind = 'kb.ingest' group by status order by status`
    .execute(database.db)
    .then((r) => Object.fromEntries(r.rows.map((row) => [row.status, row.n])) as Record<string, number>);

describe('a crash during ingestion', () => {
  it('SIGKILL mid-ingestion, restart on the same data (then SIGTERM mid-ingestion, restart): every document ends completed exactly once, none stays processing', async () => {
    const t0 = Date.now();
    const timings: Record<string, number> = {};
    const mark = (name: string) => (timings[name] = Date.now() - t0);
    const uploads = await makeUploads();
    mark('prepared');

    server = await start();
    mark('started');
    const signUp = await server.request('POST', '/api/v1/auth/sign-up', {
      body: { email: `crash-${randomBytes(3).toString('hex')}@example.com`, password: 'correct horse battery' },
    });
    expect(signUp.status, signUp.text).toBe(201);
    const token = signUp.body.data.token as string;
    const created = await server.request('POST', '/api/v1/knowledge-base/configs', {
      token,
      body: { name: 'Crash test', chunkSize: CHUNK_SIZE, chunkOverlap: CHUNK_OVERLAP },
    });
    expect(created.status, created.text).toBe(201);
    const configId = created.body.data.config.id as string;

    // Upload everything quickly, a few at a time.
    const ids = new Map<string, string>();
    for (let i = 0; i < uploads.length; i += 5) {
      await Promise.all(
        uploads.slice(i, i + 5).map(async (u) => {
          const { body, contentType } = multipartBody({
            fileName: u.fileName,
            bytes: u.bytes,
            contentType: u.kind === 'pdf' ? 'application/pdf' : 'text/plain',
            fields: { configId },
          });
          const res = await server!.request('POST', '/api/v1/knowledge-base/documents', { token, rawBody: body, headers: { 'content-type': contentType } });
          expect(res.status, `${u.fileName}: ${res.text}`).toBe(201);
          expect(res.body.data.duplicate).toBe(false);
          ids.set(u.fileName, res.body.data.document.id);
        }),
      );
    }
    mark('uploaded');

    // 1. The crash: SIGKILL to the process group as soon as a document is completed while others are processing.
    const atCrash = tally(await waitUntilMidIngestion(token, configId, 0));
    await server.crash();
    server = undefined;
    mark('crashed');
    expect(atCrash.processing, 'documents still processing when the process was killed').toBeGreaterThanOrEqual(1);
    expect(atCrash.completed).toBeGreaterThanOrEqual(1);
    expect(atCrash.processing + atCrash.completed + atCrash.failed).toBe(uploads.length);
    // It interrupted ingestion in progress: jobs were left running, leased by the dead process.
    const jobsAtCrash = await inspect(jobStatuses);
    expect(jobsAtCrash.running ?? 0, JSON.stringify(jobsAtCrash)).toBeGreaterThanOrEqual(1);
    const crashedWorkers = new Set(await inspect(runningLockers));

    // 2. Restart on the same data directory / database. Once it has made progress, stop it gracefully (SIGTERM)
    //    while documents are still being ingested: a planned restart must not lose or fail documents either.
    server = await start();
    mark('restarted');
    const atStop = tally(await waitUntilMidIngestion(token, configId, atCrash.completed)); // sessions are stored: the old token still works
    const stopCode = await server.stop();
    const stoppedOutput = server.output();
    server = undefined;
    mark('stoppedMidIngestion');
    expect(stopCode, stoppedOutput.slice(-3000)).toBe(0);
    const afterStop = await inspect(async (database) => ({
      jobs: await jobStatuses(database),
      lockers: await runningLockers(database),
      failed: (await sql<{ file_name: string; error: string | null }>`select file_name, error from kb_documents where status = 'failed'`.execute(database.db))
        .rows,
    }));
    // A graceful stop gives its own jobs back. Jobs still leased by the killed process may remain running until
    // their lease runs out (a fast restart can stop before that), but none may be held by the stopped one.
    const strayLockers = afterStop.lockers.filter((locker) => !crashedWorkers.has(locker));
    expect(strayLockers, `a graceful stop gives its jobs back: ${JSON.stringify(afterStop.jobs)}`).toEqual([]);
    expect(afterStop.failed, 'documents failed by the graceful stop').toEqual([]);
    const releasedByStop = stoppedOutput.split('\n').filter((l) => l.includes('"msg":"job interrupted by stop; released"')).length;

    // 3. Start again and wait until nothing is processing.
    server = await start();
    mark('restartedAgain');
    let after: ListedDocument[] = [];
    for (const deadline = Date.now() + RECOVERY_TIMEOUT_MS; ; ) {
      after = await listDocuments(token, configId);
      if (tally(after).processing === 0) break;
      if (Date.now() > deadline)
        throw new Error(
          `documents still processing ${RECOVERY_TIMEOUT_MS / 1000} s after the restart: ${JSON.stringify(after.filter((d) => d.status === 'processing').map((d) => [d.fileName, d.stage]))}`,
        );
      await sleep(100);
    }
    mark('recovered');

    // What a fresh, uninterrupted ingestion of each file yields, computed with the service's own extractor and splitter.
    const expectedChunks = new Map<string, number>();
    for (const u of uploads)
      expectedChunks.set(u.fileName, (await splitPages((await extractDocument(u.kind, u.bytes)).pages, CHUNK_SIZE, CHUNK_OVERLAP)).length);

    expect(after).toHaveLength(uploads.length);
    for (const doc of after) {
      expect(['completed', 'failed'], doc.fileName).toContain(doc.status);
      // Every file is valid, so a failed one was failed by the crash or the stop.
      expect({ fileName: doc.fileName, status: doc.status, error: doc.error }).toEqual({ fileName: doc.fileName, status: 'completed', error: null });
      expect(doc.chunkCount, doc.fileName).toBeGreaterThan(0);
      expect(doc.chunkCount, `${doc.fileName}: chunks of an uninterrupted ingestion`).toBe(expectedChunks.get(doc.fileName));
      expect(doc.id).toBe(ids.get(doc.fileName));
    }

    // Search works over what was recovered: a PDF page and a TXT paragraph.
    for (const [query, fileName] of [
      ['How often must the pyranometer be cleaned?', 'manual-0.pdf'],
      ['heliostat calibration procedure', 'notes-2.txt'],
    ] as const) {
      const res = await server.request('POST', '/api/v1/knowledge-base/query', { token, body: { query, configId } });
      expect(res.status, res.text).toBe(200);
      expect(res.body.data.sources.length, query).toBeGreaterThan(0);
      expect(res.body.data.sources[0].metadata.fileName, query).toBe(fileName);
    }

    const exitCode = await server.stop();
    const lastOutput = server.output();
    server = undefined;
    expect(exitCode, lastOutput.slice(-3000)).toBe(0);
    mark('stopped');

    // Nothing was ingested twice: read the database now that no process holds it.
    const reclaimed = await inspect(async ({ db }) => {
      const perDocument = await sql<{
        id: string;
        chunk_count: number;
        chunks: number;
        indexes: number;
        min_index: number | null;
        max_index: number | null;
        vectors: number;
        vector_chunks: number;
      }>`
        select d.id, d.chunk_count,
          (select count(*)::int from kb_chunks c where c.document_id = d.id) as chunks,
          (select count(distinct c.chunk_index)::int from kb_chunks c where c.document_id = d.id) as indexes,
          (select min(c.chunk_index) from kb_chunks c where c.document_id = d.id) as min_index,
          (select max(c.chunk_index) from kb_chunks c where c.document_id = d.id) as max_index,
          (select count(*)::int from kb_vectors v join kb_chunks c on c.id = v.chunk_id where c.document_id = d.id) as vectors,
          (select count(distinct v.chunk_id)::int from kb_vectors v join kb_chunks c on c.id = v.chunk_id where c.document_id = d.id) as vector_chunks
        from kb_documents d where d.config_id = ${configId}`.execute(db);
      expect(perDocument.rows).toHaveLength(uploads.length);
      for (const row of perDocument.rows) {
        const n = row.chunk_count;
        expect(
          {
            chunks: row.chunks,
            indexes: row.indexes,
            min_index: row.min_index,
            max_index: row.max_index,
            vectors: row.vectors,
            vector_chunks: row.vector_chunks,
          },
          row.id,
        ).toEqual({ chunks: n, indexes: n, min_index: 0, max_index: n - 1, vectors: n, vector_chunks: n });
      }
      // Each chunk's postings: terms and frequencies side by side, no term twice, written with the chunk.
      const postings = (
        await sql<{ total: number; mismatched: number; duplicated: number }>`
        select coalesce(sum(cardinality(terms)), 0)::int as total,
               count(*) filter (where cardinality(terms) <> cardinality(tfs))::int as mismatched,
               count(*) filter (where cardinality(terms) <> (select count(distinct t) from unnest(terms) as t))::int as duplicated
        from kb_chunks where config_id = ${configId}`.execute(db)
      ).rows[0]!;
      expect(postings.total).toBeGreaterThan(0);
      expect(postings.mismatched).toBe(0);
      expect(postings.duplicated, 'duplicate postings').toBe(0);
      // One ingest job per document, finished once; nothing queued, running or dead is left behind.
      const jobs = await sql<{ document_id: string; statuses: string[] }>`
        select payload->>'documentId' as document_id, array_agg(status order by status) as statuses
        from jobs where kind = 'kb.ingest' group by payload->>'documentId'`.execute(db);
      expect(jobs.rows).toHaveLength(uploads.length);
      for (const row of jobs.rows) expect(row.statuses, row.document_id).toEqual(['done']);
      // Only the crash counts an attempt twice (a graceful stop gives the attempt back).
      return (await sql<{ n: number }>`select count(*)::int as n from jobs where kind = 'kb.ingest' and attempts > 1`.execute(db)).rows[0]!.n;
    });
    expect(reclaimed, 'jobs the killed process held, finished by a later one').toBeGreaterThanOrEqual(1);
    expect(reclaimed).toBeLessThanOrEqual(jobsAtCrash.running!);
    console.info(
      `ingestion-crash: at SIGKILL ${JSON.stringify(atCrash)} jobs ${JSON.stringify(jobsAtCrash)}; at SIGTERM ${JSON.stringify(atStop)} jobs ${JSON.stringify(afterStop.jobs)} (${releasedByStop} interrupted and released); reclaimed ${reclaimed}; ms since start ${JSON.stringify(timings)}`,
    );
    // Four service starts (PGlite boots in each) and 25 documents through worker threads: minutes on a busy 2-core
    // machine. A budget, not a speed target.
  }, 240_000);
});
