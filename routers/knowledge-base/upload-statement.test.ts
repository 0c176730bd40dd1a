import { randomUUID } from 'node:crypto';
import { sql, type Transaction } from 'kysely';
import { describe, expect, it } from 'vitest';
import type { DB } from '../../db/types.ts';
import { perFileTestDatabase } from '../../test/helpers/test-database.ts';
import { INGEST_JOB } from './jobs.ts';
import { insertDocumentWithJob } from './repository.ts';

/**
 * An upload's document and its ingestion job are one statement: both or neither. On the test file's own migrated
 * database (PGlite, or PostgreSQL with DATABASE_URL), with foreign keys off (no owner or configuration rows needed).
 */
const testDatabase = perFileTestDatabase();
const { inRolledBackTransaction } = testDatabase;

const configId = randomUUID();

function upload(contentHash: string) {
  const documentId = randomUUID();
  const document = {
    id: documentId,
    owner_id: randomUUID(),
    config_id: configId,
    file_name: 'a.txt',
    kind: 'txt' as const,
    size_bytes: 5,
    content_hash: contentHash,
    blob_key: `${configId}/${contentHash}`,
    status: 'processing' as const,
    stage: 'uploaded' as const,
  };
  const job = { id: randomUUID(), kind: INGEST_JOB, payload: JSON.stringify({ documentId, configId }), dedupeKey: `ingest:${documentId}` };
  return { documentId, document, job };
}

const jobsOf = (trx: Transaction<DB>, documentId: string) =>
  trx.selectFrom('jobs').select(['id', 'kind', 'payload', 'status', 'dedupe_key']).where('dedupe_key', '=', `ingest:${documentId}`).execute();

describe('insertDocumentWithJob', () => {
  it('writes the document and its queued job; the same content again writes neither', () =>
    inRolledBackTransaction(async (trx) => {
      const first = upload('a'.repeat(64));
      const row = await insertDocumentWithJob(trx, first.document, first.job);
      expect(row).toMatchObject({ id: first.documentId, config_id: configId, status: 'processing', stage: 'uploaded' });
      expect(Number(row?.size_bytes)).toBe(5); // bigint: a string from postgres.js
      expect(await jobsOf(trx, first.documentId)).toEqual([
        { id: first.job.id, kind: INGEST_JOB, payload: { documentId: first.documentId, configId }, status: 'queued', dedupe_key: `ingest:${first.documentId}` },
      ]);

      const again = upload('a'.repeat(64));
      expect(await insertDocumentWithJob(trx, again.document, again.job)).toBeUndefined();
      expect(await trx.selectFrom('kb_documents').select('id').where('id', '=', again.documentId).execute()).toEqual([]);
      expect(await jobsOf(trx, again.documentId)).toEqual([]);
    }));

  // Outside any transaction (foreign keys off for the session meanwhile: nothing else uses this file's database):
  // two statements, or one statement that is not all-or-nothing, would leave the document behind here.
  it('a job that cannot be written leaves no document behind', () =>
    testDatabase.database.db.connection().execute(async (conn) => {
      const taken = upload('b'.repeat(64));
      const blockerId = randomUUID();
      await sql`set session_replication_role = replica`.execute(conn);
      try {
        await conn.insertInto('jobs').values({ id: blockerId, kind: INGEST_JOB, payload: sql`'{}'::jsonb`, dedupe_key: taken.job.dedupeKey }).execute();
        await expect(insertDocumentWithJob(conn, taken.document, taken.job)).rejects.toThrow();
        expect(await conn.selectFrom('kb_documents').select('id').where('id', '=', taken.documentId).execute()).toEqual([]);
      } finally {
        await conn.deleteFrom('jobs').where('id', '=', blockerId).execute();
        await conn.deleteFrom('kb_documents').where('id', '=', taken.documentId).execute();
        await sql`set session_replication_role = default`.execute(conn);
      }
    }));
});
