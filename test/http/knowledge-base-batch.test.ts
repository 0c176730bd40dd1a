import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DOCUMENT_FAIR_KEY_PREFIX, documentFairKey, documentJobsPerOwner, INGEST_JOB, knowledgeBaseJobHandlers } from '../../routers/knowledge-base/jobs.ts';
import type { JobHandler } from '../../routers/jobs/handler.ts';
import { startTestApp, type TestApp } from '../helpers/test-app.ts';

// Ingestion in batches: the job queue hands several documents to one call, written in one transaction.
// No job workers run here (JOB_CONCURRENCY 0): each test drains the queue itself, so a batch holds every upload.
let app: TestApp;

beforeAll(async () => {
  app = await startTestApp({ JOB_CONCURRENCY: '0', RATE_LIMIT_UPLOAD: '100' });
});
afterAll(async () => {
  await app?.stop();
});

async function knowledgeBaseWith(prefix: string, files: Record<string, string>) {
  const owner = await app.signUp(prefix);
  const kb = (await app.request('POST', '/api/v1/knowledge-base/configs', { token: owner.token, body: { name: prefix } })).body.data.config.id as string;
  const ids: Record<string, string> = {};
  for (const [fileName, text] of Object.entries(files)) {
    const res = await app.upload('/api/v1/knowledge-base/documents', { token: owner.token, fileName, bytes: Buffer.from(text), fields: { configId: kb } });
    expect(res.status).toBe(201);
    ids[fileName] = res.body.data.document.id;
  }
  return { kb, ids };
}

const db = () => app.deps.database.db;
const drain = () => app.deps.jobs.drain(knowledgeBaseJobHandlers(app.deps), { onlyHandledKinds: true });
const contentVersion = async (kb: string) =>
  (await db().selectFrom('kb_configs').select('content_version').where('id', '=', kb).executeTakeFirstOrThrow()).content_version;
const documentOf = (id: string) => db().selectFrom('kb_documents').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
async function storedRows(documentId: string) {
  const { rows } = await sql<{ chunks: number; postings: number; vectors: number }>`
    select (select count(*)::int from kb_chunks where document_id = ${documentId}) as chunks,
           (select coalesce(sum(cardinality(terms)), 0)::int from kb_chunks where document_id = ${documentId}) as postings,
           (select count(*)::int from kb_vectors v join kb_chunks c on c.id = v.chunk_id where c.document_id = ${documentId}) as vectors`.execute(db());
  return rows[0]!;
}

/** Runs `work` while the database refuses to mark `fileName` completed (a trigger raising `message`). */
async function whileCompletionRefused(fileName: string, message: string, work: () => Promise<unknown>) {
  await sql`create or replace function zz_refuse_completion() returns trigger language plpgsql as $$
    begin
      if new.status = 'completed' and new.file_name = ${sql.lit(fileName)} then raise exception ${sql.lit(message)}; end if;
      return new;
    end $$`.execute(db());
  await sql`create trigger zz_refuse_completion before update on kb_documents for each row execute function zz_refuse_completion()`.execute(db());
  try {
    await work();
  } finally {
    await sql`drop trigger zz_refuse_completion on kb_documents`.execute(db());
    await sql`drop function zz_refuse_completion()`.execute(db());
  }
}

describe('knowledge-base ingestion in batches', () => {
  it('writes a batch of documents in one transaction; a document with no text fails alone', async () => {
    const { kb, ids } = await knowledgeBaseWith('batch', {
      'a.txt': 'Glaciers carve valleys over thousands of years.',
      'b.txt': 'Volcanoes build islands from cooling lava.',
      'empty.md': '   \n\n   ',
      'c.txt': 'Rivers carry sediment to the sea.',
    });
    const before = await contentVersion(kb);
    await drain();
    for (const name of ['a.txt', 'b.txt', 'c.txt']) {
      expect(await documentOf(ids[name]!)).toMatchObject({ status: 'completed', chunk_count: 1 });
      expect(await storedRows(ids[name]!)).toMatchObject({ chunks: 1, vectors: 1 });
    }
    expect(await documentOf(ids['empty.md']!)).toMatchObject({ status: 'failed', error: 'The document contains no text' });
    // One transaction for the three documents: one change of the chunks, one bump.
    expect(await contentVersion(kb)).toBe(before + 1);
    const query = await app.request('POST', '/api/v1/knowledge-base/query', {
      token: (await app.signUp('batch-other')).token,
      body: { configId: kb, query: 'sediment' },
    });
    expect(query.status).toBe(404);
  });

  it('a write that fails midway leaves no half-written document; the others are written alone, the failed one on its retry', async () => {
    const { kb, ids } = await knowledgeBaseWith('midway', {
      'good-1.txt': 'Penguins huddle together against the Antarctic wind.',
      'poison.txt': 'This document is refused by the database while it is completed.',
      'good-2.txt': 'Albatrosses glide for hours without flapping.',
    });
    // The failure comes after the chunks, postings and vectors of the whole batch were inserted: at completion.
    await whileCompletionRefused('poison.txt', 'refused for the test', drain);
    for (const name of ['good-1.txt', 'good-2.txt']) {
      expect(await documentOf(ids[name]!)).toMatchObject({ status: 'completed' });
      expect(await storedRows(ids[name]!)).toMatchObject({ chunks: 1, vectors: 1 });
    }
    expect(await documentOf(ids['poison.txt']!)).toMatchObject({ status: 'processing' });
    expect(await storedRows(ids['poison.txt']!)).toEqual({ chunks: 0, postings: 0, vectors: 0 });
    const job = await db().selectFrom('jobs').selectAll().where(sql<string>`payload->>'documentId'`, '=', ids['poison.txt']!).executeTakeFirstOrThrow();
    expect(job).toMatchObject({ status: 'queued', attempts: 1, last_error: expect.stringMatching(/refused for the test/) });

    // The retry (due now rather than after its backoff) writes it.
    await db()
      .updateTable('jobs')
      .set({ run_at: new Date(Date.now() - 1000) })
      .where('id', '=', job.id)
      .execute();
    const before = await contentVersion(kb);
    await drain();
    expect(await documentOf(ids['poison.txt']!)).toMatchObject({ status: 'completed', chunk_count: 1 });
    expect((await storedRows(ids['poison.txt']!)).chunks).toBe(1);
    expect(await contentVersion(kb)).toBe(before + 1);
  });

  it('a document whose last attempt fails tells its owner so in a fixed sentence; the database error stays in the job', async () => {
    const { ids } = await knowledgeBaseWith('last-attempt', { 'poison-last.txt': 'This document is refused by the database on its last attempt.' });
    await sql`update jobs set attempts = max_attempts - 1 where payload->>'documentId' = ${ids['poison-last.txt']!}`.execute(db());
    await whileCompletionRefused('poison-last.txt', 'refused for the test: internal detail', drain);
    const failed = await documentOf(ids['poison-last.txt']!);
    expect(failed).toMatchObject({ status: 'failed', error: expect.stringMatching(/^Processing failed after \d+ attempts because of an unexpected error/) });
    expect(failed.error).not.toMatch(/refused|internal detail/);
    const job = await db().selectFrom('jobs').selectAll().where(sql<string>`payload->>'documentId'`, '=', ids['poison-last.txt']!).executeTakeFirstOrThrow();
    expect(job.last_error).toMatch(/internal detail/);
  });

  it("another owner's upload joins the next batch instead of waiting behind one owner's backlog", async () => {
    const texts = Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`bulk-${i}.txt`, `Bulk document number ${i} about tides and currents.`]));
    const bulk = await knowledgeBaseWith('bulk-owner', texts);
    const single = await knowledgeBaseWith('single-owner', { 'mine.txt': 'A single document about mountain goats.' });
    // Each upload's job names its owner, which is what the queue shares its workers by.
    const keys = await db()
      .selectFrom('jobs')
      .select(['fair_key', (eb) => eb.fn.countAll<number>().as('n')])
      .where('kind', '=', INGEST_JOB)
      .where('status', '=', 'queued')
      .groupBy('fair_key')
      .execute();
    const bulkOwner = (await documentOf(bulk.ids['bulk-0.txt']!)).owner_id;
    const singleOwner = (await documentOf(single.ids['mine.txt']!)).owner_id;
    expect(keys.map((k) => [k.fair_key, Number(k.n)]).sort()).toEqual(
      [
        [documentFairKey(bulkOwner), 40],
        [documentFairKey(singleOwner), 1],
      ].sort(),
    );

    // The workers as server/app.ts starts them (one here), recording the documents of each batch.
    const handlers = knowledgeBaseJobHandlers(app.deps);
    const ingest = handlers[INGEST_JOB]!;
    const batches: string[][] = [];
    const recording: JobHandler = Object.assign(ingest.bind(null), {
      batch: {
        size: ingest.batch!.size,
        run: (jobs: Parameters<NonNullable<JobHandler['batch']>['run']>[0], ctx: Parameters<NonNullable<JobHandler['batch']>['run']>[1]) => {
          batches.push(jobs.map((job) => (job.payload as { documentId: string }).documentId));
          return ingest.batch!.run(jobs, ctx);
        },
      },
    });
    app.deps.jobs.start(
      { ...handlers, [INGEST_JOB]: recording },
      { concurrency: 1, pollIntervalMs: 50, onlyHandledKinds: true, perKeyLimit: documentJobsPerOwner(1), fairKeyPrefix: DOCUMENT_FAIR_KEY_PREFIX },
    );
    try {
      const deadline = Date.now() + 30_000;
      while ((await documentOf(bulk.ids['bulk-39.txt']!)).status === 'processing' && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    } finally {
      await app.deps.jobs.stop();
    }
    expect(batches.length).toBeGreaterThanOrEqual(2);
    // Oldest first alone would have put it in the last batch, behind all forty.
    expect(batches[0]).toContain(single.ids['mine.txt']);
    expect(await documentOf(single.ids['mine.txt']!)).toMatchObject({ status: 'completed' });
  });
});
