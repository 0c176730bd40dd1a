import { randomUUID } from 'node:crypto';
import { sql, type Transaction } from 'kysely';
import { describe, expect, it } from 'vitest';
import type { DB } from '../../db/types.ts';
import { perFileTestDatabase } from '../../test/helpers/test-database.ts';
import { INGEST_JOB } from './jobs.ts';
import { insertDocumentsWithJobs, type NewUpload } from './repository.ts';

/**
 * An upload's document and its ingestion job are one statement: both or neither. On the test file's own migrated
 * database (PGlite, or PostgreSQL with DATABASE_URL), with foreign keys off (no owner or configuration rows needed).
 */
const testDatabase = perFileTestDatabase();
const { inRolledBackTransaction } = testDatabase;

const configId = randomUUID();

function upload(contentHash: string, content?: Uint8Array): NewUpload & { documentId: string } {
  const documentId = randomUUID();
  const document = {
    id: documentId,
    owner_id: randomUUID(),
    config_id: configId,
    file_name: 'a.txt',
    kind: 'txt' as const,
    size_bytes: content?.byteLength ?? 5,
    content_hash: contentHash,
    blob_key: content ? null : `${configId}/${contentHash}`,
  };
  const job = { id: randomUUID(), kind: INGEST_JOB, payload: JSON.stringify({ documentId, configId }), dedupeKey: `ingest:${documentId}` };
  return { documentId, document, job, content };
}

const jobsOf = (trx: Transaction<DB>, documentId: string) =>
  trx.selectFrom('jobs').select(['id', 'kind', 'payload', 'status', 'dedupe_key']).where('dedupe_key', '=', `ingest:${documentId}`).execute();

describe('insertDocumentsWithJobs', () => {
  it('writes the document and its queued job; the same content again writes neither', () =>
    inRolledBackTransaction(async (trx) => {
      const first = upload('a'.repeat(64));
      const [row] = await insertDocumentsWithJobs(trx, [first]);
      expect(row).toMatchObject({ id: first.documentId, config_id: configId, status: 'processing', stage: 'uploaded' });
      expect(Number(row?.size_bytes)).toBe(5); // bigint: a string from postgres.js
      expect(await jobsOf(trx, first.documentId)).toEqual([
        { id: first.job.id, kind: INGEST_JOB, payload: { documentId: first.documentId, configId }, status: 'queued', dedupe_key: `ingest:${first.documentId}` },
      ]);

      const again = upload('a'.repeat(64));
      expect(await insertDocumentsWithJobs(trx, [again])).toEqual([]);
      expect(await trx.selectFrom('kb_documents').select('id').where('id', '=', again.documentId).execute()).toEqual([]);
      expect(await jobsOf(trx, again.documentId)).toEqual([]);
    }));

  it('writes a group: each new document with its own job and kept bytes, none for content already held or twice in the group', () =>
    inRolledBackTransaction(async (trx) => {
      const held = upload('h'.repeat(64));
      await insertDocumentsWithJobs(trx, [held]);
      const everyByte = Uint8Array.from({ length: 256 }, (_, i) => i);
      const group = [
        upload('1'.repeat(64), everyByte),
        upload('h'.repeat(64), Buffer.from('held already')),
        upload('2'.repeat(64)),
        upload('3'.repeat(64), Buffer.from('first of two')),
        upload('3'.repeat(64), Buffer.from('second of two')),
        upload('4'.repeat(64), new Uint8Array(0)),
      ];
      const rows = await insertDocumentsWithJobs(trx, group);
      const written = [group[0]!, group[2]!, group[3]!, group[5]!];
      expect(rows.map((r) => r.id).sort()).toEqual(written.map((u) => u.documentId).sort());
      for (const u of written) {
        expect(rows.find((r) => r.id === u.documentId)).toMatchObject({
          status: 'processing',
          stage: 'uploaded',
          blob_key: u.document.blob_key,
          content_hash: u.document.content_hash,
        });
        expect((await jobsOf(trx, u.documentId)).map((j) => j.id)).toEqual([u.job.id]);
      }
      for (const u of [group[1]!, group[4]!]) expect(await jobsOf(trx, u.documentId)).toEqual([]);
      const kept = await trx
        .selectFrom('kb_document_contents')
        .select(['document_id', 'bytes'])
        .where(
          'document_id',
          'in',
          group.map((u) => u.documentId),
        )
        .execute();
      expect(new Map(kept.map((k) => [k.document_id, Buffer.from(k.bytes).toString('hex')]))).toEqual(
        new Map([
          [group[0]!.documentId, Buffer.from(everyByte).toString('hex')],
          [group[3]!.documentId, Buffer.from('first of two').toString('hex')],
          [group[5]!.documentId, ''],
        ]),
      );
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
        await expect(insertDocumentsWithJobs(conn, [upload('c'.repeat(64)), taken])).rejects.toThrow();
        expect(await conn.selectFrom('kb_documents').select('id').where('config_id', '=', configId).execute()).toEqual([]);
      } finally {
        await conn.deleteFrom('jobs').where('id', '=', blockerId).execute();
        await conn.deleteFrom('kb_documents').where('config_id', '=', configId).execute();
        await sql`set session_replication_role = default`.execute(conn);
      }
    }));
});
