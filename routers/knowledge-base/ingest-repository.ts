import { sql, type Kysely, type Transaction } from 'kysely';
import type { DB, DocumentStage } from '../../db/types.ts';
import { jobPayloadNames } from '../jobs/repository.ts';
import type { KbDocumentRow } from './repository.ts';
import { nthVector } from './search-repository.ts';

/** The SQL of a document's ingestion (ingest.ts): its stages, its chunks and vectors, its completion, the sweep. */

type Db = Kysely<DB> | Transaction<DB>;

/**
 * A batch's start, in one statement: those of these documents still `processing` become `extracting` and are read
 * back with the bytes of the ones kept in the database (`inline_bytes`; null for a file in the blob store).
 */
export async function startExtraction(db: Db, ids: string[]): Promise<Array<KbDocumentRow & { inline_bytes: Buffer | null }>> {
  if (ids.length === 0) return [];
  const { rows } = await sql<KbDocumentRow & { inline_bytes: Buffer | null }>`
    update kb_documents d set stage = 'extracting', updated_at = now()
     where d.id = any(cast(${ids} as uuid[])) and d.status = 'processing'
    returning d.*, (select c.bytes from kb_document_contents c where c.document_id = d.id) as inline_bytes`.execute(db);
  return rows;
}

/** Only while the documents are processing (a deletion or a failure meanwhile wins). */
export async function setDocumentsStage(db: Db, ids: string[], stage: DocumentStage) {
  if (ids.length === 0) return;
  await db.updateTable('kb_documents').set({ stage, updated_at: new Date() }).where('id', 'in', ids).where('status', '=', 'processing').execute();
}

export const failProcessingDocument = (db: Db, id: string, reason: string) =>
  db
    .updateTable('kb_documents')
    .set({ status: 'failed', stage: 'failed', error: reason, updated_at: new Date() })
    .where('id', '=', id)
    .where('status', '=', 'processing')
    .returningAll()
    .executeTakeFirst();

/** The serving version under a row lock that holds off a model switch until the caller commits. */
export const lockServingVersion = async (db: Db, configId: string) =>
  (await db.selectFrom('kb_configs').select(['serving_version']).where('id', '=', configId).forNoKeyUpdate().executeTakeFirst())?.serving_version;

/** The documents still `processing`, locked in id order (the same order for every caller, so no deadlock). */
export async function lockProcessingDocuments(db: Db, ids: string[]): Promise<Set<string>> {
  if (ids.length === 0) return new Set();
  const rows = await db.selectFrom('kb_documents').select(['id', 'status']).where('id', 'in', ids).orderBy('id').forUpdate().execute();
  return new Set(rows.filter((r) => r.status === 'processing').map((r) => r.id));
}

export interface NewChunk {
  id: string;
  index: number;
  page: number | null;
  text: string;
  termCount: number;
  tokenCount: number;
  /** Distinct analysed terms, and at the same positions how often each occurs. */
  terms: string[];
  tfs: number[];
}

export interface ChunkOfDocument extends NewChunk {
  documentId: string;
  /** Its embedding, of the version replaceChunks is given; none for a chunk without a direction (all zeros). */
  vector?: Float32Array;
}

/**
 * Rows per statement: few statements per batch, and each short. On the embedded database a statement holds the
 * request thread while it runs (about 0.3 ms a row with the terms index), so 2,000 rows was a 0.6 s freeze.
 */
const CHUNK_ROWS_PER_STATEMENT = 250;

/** A PostgreSQL array literal of strings: every element quoted, so no content can break it. */
const textArrayLiteral = (values: string[]) => `{${values.map((v) => `"${v.replace(/[\\"]/g, '\\$&')}"`).join(',')}}`;

/**
 * Replaces the chunks (with their terms) of these documents, all of one configuration, and writes the chunks'
 * vectors of embedding version `version` in the same statements (a chunk without one, such as a text with no
 * letters or digits, gets none). The rows go in as a few arrays per statement (unnest), not as one parameter per
 * value: a statement's text is the same whatever the row count, so it is parsed and planned once, and a batch of
 * documents is a handful of statements.
 */
export async function replaceChunks(db: Db, configId: string, version: number, documentIds: string[], chunks: ChunkOfDocument[]) {
  if (documentIds.length > 0) await db.deleteFrom('kb_chunks').where('document_id', 'in', documentIds).execute();
  for (let i = 0; i < chunks.length; i += CHUNK_ROWS_PER_STATEMENT) {
    const part = chunks.slice(i, i + CHUNK_ROWS_PER_STATEMENT);
    const withVector = part.filter((c) => c.vector);
    // The vectors' foreign key is checked at the statement's end, after the chunks' insert.
    await sql`
      with new_chunk as (
        insert into kb_chunks (id, document_id, config_id, chunk_index, page, text, term_count, token_count, terms, tfs)
        select id::uuid, document_id::uuid, ${configId}::uuid, chunk_index, page, text, term_count, token_count, terms::text[], tfs::int[]
        from unnest(cast(${part.map((c) => c.id)} as text[]), cast(${part.map((c) => c.documentId)} as text[]),
                    cast(${part.map((c) => c.index)} as int[]), cast(${part.map((c) => c.page)} as int[]),
                    cast(${part.map((c) => c.text)} as text[]), cast(${part.map((c) => c.termCount)} as int[]),
                    cast(${part.map((c) => c.tokenCount)} as int[]), cast(${part.map((c) => textArrayLiteral(c.terms))} as text[]),
                    cast(${part.map((c) => `{${c.tfs.join(',')}}`)} as text[]))
          as c(id, document_id, chunk_index, page, text, term_count, token_count, terms, tfs)
      )
      insert into kb_vectors (chunk_id, config_id, version, embedding)
      select v.chunk_id, ${configId}::uuid, ${version}::int, ${nthVector(
        withVector.map((c) => c.vector!),
        sql.ref('v.n'),
      )}
        from unnest(cast(${withVector.map((c) => c.id)} as uuid[])) with ordinality as v(chunk_id, n)`.execute(db);
  }
}

/**
 * Marks these documents of one configuration completed with their counts and bumps the configuration's content
 * version (its chunks changed: see lexical-index.ts), in one statement; answers the documents' rows.
 */
export async function completeDocuments(
  db: Db,
  configId: string,
  counts: Array<{ id: string; pageCount: number | null; chunkCount: number }>,
): Promise<KbDocumentRow[]> {
  if (counts.length === 0) return [];
  const { rows } = await sql<KbDocumentRow>`
    with completed as (
      update kb_documents d
         set status = 'completed', stage = 'searchable', error = null, page_count = c.page_count, chunk_count = c.chunk_count, updated_at = now()
        from unnest(cast(${counts.map((c) => c.id)} as text[]), cast(${counts.map((c) => c.pageCount)} as int[]),
                    cast(${counts.map((c) => c.chunkCount)} as int[])) as c(id, page_count, chunk_count)
       where d.id = c.id::uuid
      returning d.*
    ),
    bumped as (update kb_configs set content_version = content_version + 1 where id = ${configId})
    select * from completed`.execute(db);
  return rows;
}

/**
 * Documents `processing` with no queued or running ingestion job (`kind`), and whether such a job died (with its
 * last error). One statement: the sweep runs at start-up and periodically.
 */
export async function findOrphanedDocuments(db: Db, kind: string) {
  const names = jobPayloadNames('documentId', sql`d.id::text`);
  const { rows } = await sql<{ id: string; config_id: string; owner_id: string; dead_error: string | null; dead: boolean }>`
    select d.id, d.config_id, d.owner_id,
      exists (select 1 from jobs j where j.kind = ${kind} and j.status = 'dead' and ${names}) as dead,
      (select j.last_error from jobs j where j.kind = ${kind} and j.status = 'dead' and ${names} order by j.updated_at desc limit 1) as dead_error
    from kb_documents d
    where d.status = 'processing'
      and not exists (
        select 1 from jobs j
        where j.kind = ${kind} and j.status in ('queued', 'running') and ${names}
      )`.execute(db);
  return rows;
}
