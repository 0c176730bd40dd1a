import { sql, type Kysely, type Selectable, type Transaction } from 'kysely';
import type { DB, KbConfigsTable, KbDocumentsTable } from '../../db/types.ts';
import { toIso } from '../../schema/common.ts';

export type KbConfigRow = Selectable<KbConfigsTable>;
export type KbDocumentRow = Selectable<KbDocumentsTable>;
type Db = Kysely<DB> | Transaction<DB>;

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
    },
    servingEmbeddingModel: row.serving_embedding.model,
    llm: row.llm ? { provider: row.llm.provider, model: row.llm.model, baseUrl: row.llm.baseUrl, hasApiKey: row.llm_api_key_enc !== null } : null,
    memory: { enabled: row.memory_enabled, maxMessages: row.memory_max_messages },
    tools: row.tools.map((t) => ({ name: t.name, enabled: t.enabled, config: t.config ?? {} })),
    embeddingStatus: { servingVersion: row.serving_version, targetVersion: row.embedding_version, reembedding: row.serving_version !== row.embedding_version },
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

export const findConfigById = (db: Db, id: string) => db.selectFrom('kb_configs').selectAll().where('id', '=', id).executeTakeFirst();

export const listDocuments = (db: Db, ownerId: string, configId: string) =>
  db.selectFrom('kb_documents').selectAll().where('owner_id', '=', ownerId).where('config_id', '=', configId).orderBy('created_at', 'desc').orderBy('id').execute();

export const findDocument = (db: Db, ownerId: string, id: string) =>
  db.selectFrom('kb_documents').selectAll().where('owner_id', '=', ownerId).where('id', '=', id).executeTakeFirst();

export const findDocumentById = (db: Db, id: string) => db.selectFrom('kb_documents').selectAll().where('id', '=', id).executeTakeFirst();

export const findDocumentByHash = (db: Db, configId: string, contentHash: string) =>
  db.selectFrom('kb_documents').selectAll().where('config_id', '=', configId).where('content_hash', '=', contentHash).executeTakeFirst();

export async function bumpContentVersion(db: Db, configId: string) {
  await db.updateTable('kb_configs').set((eb) => ({ content_version: eb('content_version', '+', 1) })).where('id', '=', configId).execute();
}

/** Pending jobs that belong to a configuration or document (they are removed with it). */
export async function deleteJobsFor(db: Db, field: 'configId' | 'documentId', ids: string[]) {
  if (ids.length === 0) return;
  await db
    .deleteFrom('jobs')
    .where('status', 'in', ['queued', 'running'])
    .where(sql<string>`payload->>${field}`, 'in', ids)
    .execute();
}
