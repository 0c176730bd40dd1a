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
  const embedder = embedderFor(deps, config);
  const withVec = await hasVecColumn(db);
  for (;;) {
    const pending = await db
      .selectFrom('kb_chunks')
      .select(['kb_chunks.id', 'kb_chunks.text'])
      .where('kb_chunks.config_id', '=', config.id)
      .where(({ not, exists, selectFrom }) =>
        not(exists(selectFrom('kb_vectors').select('kb_vectors.chunk_id').whereRef('kb_vectors.chunk_id', '=', 'kb_chunks.id').where('kb_vectors.version', '=', job.payload.version))),
      )
      .orderBy('kb_chunks.id')
      .limit(BATCH)
      .execute();
    if (pending.length === 0) break;
    const { vectors } = await embedder.embed(pending.map((c) => c.text), ctx.signal);
    await insertVectors(db, pending.map((c, i) => ({ chunkId: c.id, configId: config.id, version: job.payload.version, vector: vectors[i]! })), withVec);
    await ctx.heartbeat();
  }
  await db.transaction().execute(async (trx) => {
    const current = await trx.selectFrom('kb_configs').select(['embedding_version']).where('id', '=', config.id).forUpdate().executeTakeFirst();
    if (current?.embedding_version !== job.payload.version) return;
    await trx.updateTable('kb_configs').set((eb) => ({ serving_version: job.payload.version, content_version: eb('content_version', '+', 1) })).where('id', '=', config.id).execute();
    await trx.deleteFrom('kb_vectors').where('config_id', '=', config.id).where('version', '<>', job.payload.version).execute();
  });
}
