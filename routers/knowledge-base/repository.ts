import { sql, type InsertObject, type Kysely, type RawBuilder, type Selectable, type Transaction, type UpdateObject } from 'kysely';
import type { DB, DocumentStage, KbConfigsTable, KbDocumentsTable, KbToolSetting } from '../../db/types.ts';
import { jsonb } from '../../db/json.ts';
import { toIso } from '../../schema/common.ts';
import { jobInsertsFor, jobPayloadNames, type NewJob } from '../jobs/repository.ts';
import { nthVector } from './search-repository.ts';

export type KbConfigRow = Selectable<KbConfigsTable>;
export type KbDocumentRow = Selectable<KbDocumentsTable>;
type Db = Kysely<DB> | Transaction<DB>;

/** Whether a model switch is under way. A failed one is not: it waits for the owner to save the settings again. */
export const reembedding = (row: Pick<KbConfigRow, 'serving_version' | 'embedding_version' | 'embedding_error'>) =>
  row.serving_version !== row.embedding_version && row.embedding_error === null;

export function toKbConfig(row: KbConfigRow) {
  return {
    id: row.id,
    name: row.name,
    temperature: Math.round(row.temperature * 100) / 100,
    maxTokens: row.max_tokens,
    chunkSize: row.chunk_size,
    chunkOverlap: row.chunk_overlap,
    retrievalDepth: row.retrieval_depth,
    language: row.language as 'en',
    systemPrompt: row.system_prompt,
    embedding: {
      provider: row.embedding.provider,
      model: row.embedding.model,
      baseUrl: row.embedding.baseUrl ?? null,
      dimensions: row.embedding.dimensions,
      hasApiKey: row.embedding_api_key_enc !== null,
      error: row.embedding_error,
    },
    servingEmbeddingModel: row.serving_embedding.model,
    llm: row.llm ? { provider: row.llm.provider, model: row.llm.model, baseUrl: row.llm.baseUrl, hasApiKey: row.llm_api_key_enc !== null } : null,
    memory: { enabled: row.memory_enabled, maxMessages: row.memory_max_messages },
    tools: row.tools.map((t) => ({ name: t.name, enabled: t.enabled, config: t.config ?? {} })),
    embeddingStatus: {
      servingVersion: row.serving_version,
      targetVersion: row.embedding_version,
      reembedding: reembedding(row),
    },
    createdAt: toIso(row.created_at)!,
    updatedAt: toIso(row.updated_at)!,
  };
}

export function toKbDocument(row: KbDocumentRow) {
  return {
    id: row.id,
    configId: row.config_id,
    fileName: row.file_name,
    kind: row.kind,
    sizeBytes: Number(row.size_bytes),
    status: row.status,
    stage: row.stage,
    error: row.error,
    pageCount: row.page_count,
    chunkCount: row.chunk_count,
    createdAt: toIso(row.created_at)!,
    updatedAt: toIso(row.updated_at)!,
  };
}

export const listConfigs = (db: Db, ownerId: string) =>
  db.selectFrom('kb_configs').selectAll().where('owner_id', '=', ownerId).orderBy('created_at', 'desc').orderBy('id').execute();

export const findConfig = (db: Db, ownerId: string, id: string) =>
  db.selectFrom('kb_configs').selectAll().where('owner_id', '=', ownerId).where('id', '=', id).executeTakeFirst();

/** The id back when the owner has this configuration: a check that reads one column, not the whole row. */
export const findOwnedConfigId = async (db: Db, ownerId: string, id: string) =>
  (await db.selectFrom('kb_configs').select('id').where('owner_id', '=', ownerId).where('id', '=', id).executeTakeFirst())?.id;

/**
 * The same check inside a transaction that will refer to the configuration: its row is locked against deletion
 * until that transaction ends, so the deletion's detaching of interfaces sees the new reference.
 */
export const lockOwnedConfigId = async (trx: Transaction<DB>, ownerId: string, id: string) =>
  (await trx.selectFrom('kb_configs').select('id').where('owner_id', '=', ownerId).where('id', '=', id).forShare().executeTakeFirst())?.id;

export const findConfigById = (db: Db, id: string) => db.selectFrom('kb_configs').selectAll().where('id', '=', id).executeTakeFirst();

export const listDocuments = (db: Db, ownerId: string, configId: string) =>
  db
    .selectFrom('kb_documents')
    .selectAll()
    .where('owner_id', '=', ownerId)
    .where('config_id', '=', configId)
    .orderBy('created_at', 'desc')
    .orderBy('id')
    .execute();

export const findDocumentByHash = (db: Db, configId: string, contentHash: string) =>
  db.selectFrom('kb_documents').selectAll().where('config_id', '=', configId).where('content_hash', '=', contentHash).executeTakeFirst();

export async function bumpContentVersion(db: Db, configId: string) {
  await db
    .updateTable('kb_configs')
    .set((eb) => ({ content_version: eb('content_version', '+', 1) }))
    .where('id', '=', configId)
    .execute();
}

const CONFIG_JSON_COLUMNS = ['embedding', 'serving_embedding', 'llm', 'tools'] as const;

/** Callers pass the JSON columns as objects; they are encoded as jsonb here, with the rest of the statement. */
function encodeJsonColumns<T extends Partial<Record<(typeof CONFIG_JSON_COLUMNS)[number], unknown>>>(values: T): T {
  const encoded: Record<string, unknown> = { ...values };
  for (const column of CONFIG_JSON_COLUMNS) {
    const value = values[column];
    if (value !== undefined && value !== null) encoded[column] = jsonb(value);
  }
  return encoded as T;
}

export const insertConfig = (db: Db, values: InsertObject<DB, 'kb_configs'>) =>
  db.insertInto('kb_configs').values(encodeJsonColumns(values)).returningAll().executeTakeFirstOrThrow();

/** With `newEmbeddingVersion`, the target embedding version goes up by one (the serving one follows after re-embedding). */
export const updateConfig = (db: Db, id: string, changes: UpdateObject<DB, 'kb_configs'>, newEmbeddingVersion: boolean) =>
  db
    .updateTable('kb_configs')
    .set((eb) => ({
      ...encodeJsonColumns(changes),
      ...(newEmbeddingVersion ? { embedding_version: eb('embedding_version', '+', 1) } : {}),
      updated_at: new Date(),
    }))
    .where('id', '=', id)
    .returningAll()
    .executeTakeFirstOrThrow();

export const replaceTools = (db: Db, id: string, tools: KbToolSetting[]) =>
  db
    .updateTable('kb_configs')
    .set({ tools: jsonb(tools), updated_at: new Date() })
    .where('id', '=', id)
    .returningAll()
    .executeTakeFirstOrThrow();

export const listDocumentIds = async (db: Db, configId: string) =>
  (await db.selectFrom('kb_documents').select('id').where('config_id', '=', configId).execute()).map((d) => d.id);

export async function deleteConfig(db: Db, id: string) {
  await db.deleteFrom('kb_configs').where('id', '=', id).execute();
}

/** Vectors of the serving version, per configuration of the owner. */
export async function countServingVectors(db: Db, ownerId: string): Promise<Map<string, number>> {
  const counts = await db
    .selectFrom('kb_vectors')
    .innerJoin('kb_configs', 'kb_configs.id', 'kb_vectors.config_id')
    .select(['kb_vectors.config_id'])
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('kb_configs.owner_id', '=', ownerId)
    .whereRef('kb_vectors.version', '=', 'kb_configs.serving_version')
    .groupBy('kb_vectors.config_id')
    .execute();
  return new Map(counts.map((c) => [c.config_id, Number(c.n)]));
}

export interface NewUpload {
  document: Pick<KbDocumentRow, 'id' | 'owner_id' | 'config_id' | 'file_name' | 'kind' | 'content_hash' | 'blob_key'> & { size_bytes: number };
  job: Pick<NewJob, 'id' | 'kind' | 'payload' | 'dedupeKey' | 'fairKey'>;
  /** The file's bytes, kept in kb_document_contents (document.blob_key null), or undefined when in the blob store. */
  content?: Uint8Array;
}

/**
 * New documents, each with the job that ingests it and its kept file, in one statement (atomic without a
 * transaction: a document never exists without its job). Answers the rows written; an upload missing from them has
 * content its knowledge base already holds (kb_documents_content_unique, also within this group), and no job either.
 */
export async function insertDocumentsWithJobs(db: Db, given: NewUpload[]): Promise<KbDocumentRow[]> {
  if (given.length === 0) return [];
  // In one order for every statement: on PostgreSQL, two statements inserting the same two contents in opposite
  // orders would each wait for the other's unique-index entry (a deadlock, broken only after deadlock_timeout).
  const byContent = (u: NewUpload) => `${u.document.config_id}/${u.document.content_hash}`;
  const uploads = [...given].sort((a, b) => (byContent(a) < byContent(b) ? -1 : byContent(a) > byContent(b) ? 1 : 0));
  const documents = uploads.map((u) => u.document);
  const ids = documents.map((d) => d.id);
  const kept = uploads.filter((u) => u.content);
  // The kept files go as one bytea cut by offsets: arrays of bytea are not sent alike by the two drivers.
  const starts: number[] = [];
  let start = 1;
  for (const upload of kept) {
    starts.push(start);
    start += upload.content!.byteLength;
  }
  const bytes = Buffer.concat(kept.map((u) => u.content!));
  const { rows } = await sql<KbDocumentRow>`
    with new_document as (
      insert into kb_documents (id, owner_id, config_id, file_name, kind, size_bytes, content_hash, blob_key, status, stage)
      select d.id, d.owner_id, d.config_id, d.file_name, d.kind, d.size_bytes, d.content_hash, d.blob_key, 'processing', 'uploaded'
        from unnest(cast(${ids} as uuid[]), cast(${documents.map((d) => d.owner_id)} as uuid[]), cast(${documents.map((d) => d.config_id)} as uuid[]),
                    cast(${documents.map((d) => d.file_name)} as text[]), cast(${documents.map((d) => d.kind)} as text[]),
                    cast(${documents.map((d) => d.size_bytes)} as bigint[]), cast(${documents.map((d) => d.content_hash)} as text[]),
                    cast(${documents.map((d) => d.blob_key)} as text[]))
          as d(id, owner_id, config_id, file_name, kind, size_bytes, content_hash, blob_key)
      on conflict (config_id, content_hash) do nothing
      returning *
    ),
    new_job as (${jobInsertsFor(
      'new_document',
      ids,
      uploads.map((u) => u.job),
    )}),
    new_content as (
      insert into kb_document_contents (document_id, bytes)
      select c.document_id, substring(${bytes}::bytea from c.start for c.length)
        from unnest(cast(${kept.map((u) => u.document.id)} as uuid[]), cast(${starts} as int[]), cast(${kept.map((u) => u.content!.byteLength)} as int[]))
          as c(document_id, start, length)
        join new_document n on n.id = c.document_id
    )
    select * from new_document`.execute(db);
  return rows;
}

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

/** A failed document uploaded again goes back to processing; undefined when it is no longer failed. */
export const retryFailedDocument = (db: Db, id: string, fileName: string) =>
  db
    .updateTable('kb_documents')
    .set({ status: 'processing', stage: 'uploaded', error: null, file_name: fileName, updated_at: new Date() })
    .where('id', '=', id)
    .where('status', '=', 'failed')
    .returningAll()
    .executeTakeFirst();

/**
 * Locks the configuration rows of these documents, in id order: the lock order of ingestion (config rows first,
 * then documents), so a deletion and an ingestion never deadlock.
 */
export async function lockConfigsOfDocuments(db: Db, ownerId: string, documentIds: string[]) {
  const configIds = (
    await db.selectFrom('kb_documents').select('config_id').distinct().where('owner_id', '=', ownerId).where('id', 'in', documentIds).execute()
  )
    .map((r) => r.config_id)
    .sort();
  if (configIds.length > 0) await db.selectFrom('kb_configs').select('id').where('id', 'in', configIds).orderBy('id').forNoKeyUpdate().execute();
}

export const deleteOwnedDocuments = (db: Db, ownerId: string, ids: string[]) =>
  db.deleteFrom('kb_documents').where('owner_id', '=', ownerId).where('id', 'in', ids).returning(['id', 'config_id', 'blob_key']).execute();

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

/** The target embedding version under the same row lock. */
export const lockEmbeddingVersion = async (db: Db, configId: string) =>
  (await db.selectFrom('kb_configs').select(['embedding_version']).where('id', '=', configId).forNoKeyUpdate().executeTakeFirst())?.embedding_version;

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

/** Chunks of the configuration with no vector of `version` yet, in id order. */
export const chunksWithoutVector = (db: Db, configId: string, version: number, limit: number) =>
  db
    .selectFrom('kb_chunks')
    .select(['kb_chunks.id', 'kb_chunks.text'])
    .where('kb_chunks.config_id', '=', configId)
    .where(({ not, exists, selectFrom }) =>
      not(
        exists(
          selectFrom('kb_vectors').select('kb_vectors.chunk_id').whereRef('kb_vectors.chunk_id', '=', 'kb_chunks.id').where('kb_vectors.version', '=', version),
        ),
      ),
    )
    .orderBy('kb_chunks.id')
    .limit(limit)
    .execute();

export async function countChunksWithoutVector(db: Db, configId: string, version: number): Promise<number> {
  const { rows } = await sql<{ n: number }>`
        select count(*)::int as n from kb_chunks c
        where c.config_id = ${configId}
          and not exists (select 1 from kb_vectors v where v.chunk_id = c.id and v.version = ${version})`.execute(db);
  return rows[0]?.n ?? 0;
}

/**
 * Serving switches to `version` (model and key follow), and the vectors of every other version go. Answers the
 * row when serving changed (undefined when it already served `version`).
 */
export async function switchServingVersion(db: Db, configId: string, version: number) {
  const switched = await db
    .updateTable('kb_configs')
    .set((eb) => ({
      serving_version: version,
      serving_embedding: eb.ref('embedding'),
      serving_embedding_api_key_enc: eb.ref('embedding_api_key_enc'),
      embedding_error: null,
      content_version: eb('content_version', '+', 1),
      updated_at: new Date(),
    }))
    .where('id', '=', configId)
    .where('serving_version', '<>', version)
    .returningAll()
    .executeTakeFirst();
  await db.deleteFrom('kb_vectors').where('config_id', '=', configId).where('version', '<>', version).execute();
  return switched;
}

/**
 * Records why the switch to `version` failed, once, while `version` is still the target and not served. With
 * `unlessActiveJob` (a job kind), not while a job of that kind for this switch is queued or running: the sweep
 * must not fail a switch the owner has just restarted. Answers the row when it changed.
 */
export async function failEmbeddingSwitch(db: Db, configId: string, version: number, reason: string, unlessActiveJob?: string) {
  return db
    .updateTable('kb_configs')
    .set({ embedding_error: reason, updated_at: new Date() })
    .where('id', '=', configId)
    .where('embedding_version', '=', version)
    .where('serving_version', '<>', version)
    .where('embedding_error', 'is', null)
    .$if(unlessActiveJob !== undefined, (qb) =>
      qb.where(
        sql<boolean>`not exists (select 1 from jobs j where j.kind = ${unlessActiveJob} and j.status in ('queued', 'running') and ${reembedJobOf(sql`${configId}`, sql`${String(version)}`)})`,
      ),
    )
    .returningAll()
    .executeTakeFirst();
}

/** How a re-embedding job (alias `j`) names its configuration and version (payload `{configId, version}`). */
const reembedJobOf = (configId: RawBuilder<unknown>, version: RawBuilder<unknown>) =>
  sql`${jobPayloadNames('configId', configId)} and ${jobPayloadNames('version', version)}`;

/**
 * Configurations switching embedding models (target not served, no failure recorded) with no queued or running
 * re-embedding job (`kind`) for their target, and the status and error of the latest job there was: 'dead' when
 * it died without recording why (its last lease ran out), none or 'done' when it was lost. One statement: the
 * sweep runs at start-up and periodically.
 */
export async function findStalledEmbeddingSwitches(db: Db, kind: string) {
  const names = reembedJobOf(sql`c.id::text`, sql`c.embedding_version::text`);
  const { rows } = await sql<{ id: string; version: number; last_status: string | null; last_error: string | null }>`
    select c.id, c.embedding_version as version, latest.status as last_status, latest.last_error
    from kb_configs c
    left join lateral (
      select j.status, j.last_error from jobs j
      where j.kind = ${kind} and ${names}
      order by j.created_at desc, j.updated_at desc
      limit 1
    ) latest on true
    where c.serving_version <> c.embedding_version and c.embedding_error is null
      and not exists (select 1 from jobs j where j.kind = ${kind} and j.status in ('queued', 'running') and ${names})`.execute(db);
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

/** How many documents an owner stores and their total size (for the subscription's usage). */
export const documentTotals = async (db: Db, ownerId: string) =>
  (await db
    .selectFrom('kb_documents')
    .select([sql<number>`count(*)::float8`.as('documents'), sql<number>`coalesce(sum(size_bytes), 0)::float8`.as('storageBytes')])
    .where('owner_id', '=', ownerId)
    .executeTakeFirst()) ?? { documents: 0, storageBytes: 0 };

/** Documents by status now, of one owner or of one of their configurations (the dashboard). */
export async function documentsByStatus(db: Db, ownerId: string, configId?: string) {
  let query = db
    .selectFrom('kb_documents')
    .select(['status', sql<number>`count(*)::float8`.as('n'), sql<number | null>`extract(epoch from now() - min(created_at))::float8`.as('oldest_seconds')])
    .where('owner_id', '=', ownerId);
  if (configId) query = query.where('config_id', '=', configId);
  return query.groupBy('status').execute();
}
