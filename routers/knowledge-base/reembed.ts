import { sql } from 'kysely';
import type { AppDeps } from '../context.ts';
import type { Job, JobContext } from '../../server/jobs/queue.ts';
import { embedderFor } from './embedders.ts';
import { hasVecColumn, insertVectors } from './vectors.ts';
import { findConfigById } from './repository.ts';

export interface ReembedPayload {
  configId: string;
  version: number;
}

const BATCH = 64;

/**
 * Re-embeds every chunk of a configuration under its new embedding version, in batches (resumable: chunks
 * already embedded for that version are skipped). Queries keep reading serving_version until the last
 * chunk is done; then serving switches and the old vectors are dropped.
 */
export async function reembedConfig(deps: AppDeps, job: Job<ReembedPayload>, ctx: JobContext): Promise<void> {
  const db = deps.database.db;
  const config = await findConfigById(db, job.payload.configId);
  if (!config || config.embedding_version !== job.payload.version) return;
  const embedder = embedderFor(deps, config, 'target');
  const withVec = await hasVecColumn(db);
  const pendingChunks = (limit: number) =>
    db
      .selectFrom('kb_chunks')
      .select(['kb_chunks.id', 'kb_chunks.text'])
      .where('kb_chunks.config_id', '=', config.id)
      .where(({ not, exists, selectFrom }) =>
        not(exists(selectFrom('kb_vectors').select('kb_vectors.chunk_id').whereRef('kb_vectors.chunk_id', '=', 'kb_chunks.id').where('kb_vectors.version', '=', job.payload.version))),
      )
      .orderBy('kb_chunks.id')
      .limit(limit)
      .execute();

  for (;;) {
    for (let batch = await pendingChunks(BATCH); batch.length > 0; batch = await pendingChunks(BATCH)) {
      const { vectors } = await embedder.embed(batch.map((c) => c.text), ctx.signal);
      await insertVectors(db, batch.map((c, i) => ({ chunkId: c.id, configId: config.id, version: job.payload.version, vector: vectors[i]! })), withVec);
      await ctx.heartbeat();
    }
    // Switch only if no chunk lacks a new vector, checked under the config row lock that ingestion also
    // takes: a document committed meanwhile sends us round the loop once more.
    const switched = await db.transaction().execute(async (trx) => {
      const current = await trx.selectFrom('kb_configs').select(['embedding_version']).where('id', '=', config.id).forNoKeyUpdate().executeTakeFirst();
      if (current?.embedding_version !== job.payload.version) return true;
      const { rows } = await sql<{ n: number }>`
        select count(*)::int as n from kb_chunks c
        where c.config_id = ${config.id}
          and not exists (select 1 from kb_vectors v where v.chunk_id = c.id and v.version = ${job.payload.version})`.execute(trx);
      if ((rows[0]?.n ?? 0) > 0) return false;
      await trx
        .updateTable('kb_configs')
        .set((eb) => ({
          serving_version: job.payload.version,
          serving_embedding: eb.ref('embedding'),
          serving_embedding_api_key_enc: eb.ref('embedding_api_key_enc'),
          content_version: eb('content_version', '+', 1),
        }))
        .where('id', '=', config.id)
        .execute();
      await trx.deleteFrom('kb_vectors').where('config_id', '=', config.id).where('version', '<>', job.payload.version).execute();
      return true;
    });
    if (switched) return;
  }
}
