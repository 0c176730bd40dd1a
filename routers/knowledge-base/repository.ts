import { sql, type InsertObject, type Kysely, type Selectable, type Transaction, type UpdateObject } from 'kysely';
import type { DB, KbConfigsTable, KbDocumentsTable, KbToolSetting } from '../../db/types.ts';
import { jsonb } from '../../db/json.ts';
import { toIso } from '../../schema/common.ts';
import { jobInsertsFor, type NewJob } from '../jobs/repository.ts';

/**
 * The SQL of knowledge bases and their documents. A document's ingestion has its own in ingest-repository.ts, an
 * embedding model switch in reembed-repository.ts, retrieval in search-repository.ts.
 */

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
