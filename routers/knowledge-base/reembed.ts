import type { AppDeps } from '../context.ts';
import type { Job, JobContext } from '../jobs/queue.ts';
import { documentEmbedderFor } from './embedders.ts';
import { insertVectors } from './vectors.ts';
import { chunksWithoutVector, countChunksWithoutVector, findConfigById, lockEmbeddingVersion, switchServingVersion } from './repository.ts';

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
export async function reembedConfig(
  deps: Pick<AppDeps, 'database' | 'documentPool' | 'http' | 'secrets'>,
  job: Job<ReembedPayload>,
  ctx: JobContext,
): Promise<void> {
  const db = deps.database.db;
  const config = await findConfigById(db, job.payload.configId);
  if (!config || config.embedding_version !== job.payload.version) return;
  const embedder = documentEmbedderFor(deps, config, 'target');
  const pendingChunks = (limit: number) => chunksWithoutVector(db, config.id, job.payload.version, limit);

  for (;;) {
    for (let batch = await pendingChunks(BATCH); batch.length > 0; batch = await pendingChunks(BATCH)) {
      const { vectors } = await embedder.embed(
        batch.map((c) => c.text),
        ctx.signal,
      );
      await insertVectors(
        db,
        batch.map((c, i) => ({ chunkId: c.id, configId: config.id, version: job.payload.version, vector: vectors[i]! })),
      );
      await ctx.heartbeat();
    }
    // Switch only if no chunk lacks a new vector, checked under the config row lock that ingestion also
    // takes: a document committed meanwhile sends us round the loop once more.
    const switched = await db.transaction().execute(async (trx) => {
      if ((await lockEmbeddingVersion(trx, config.id)) !== job.payload.version) return true;
      if ((await countChunksWithoutVector(trx, config.id, job.payload.version)) > 0) return false;
      await switchServingVersion(trx, config.id, job.payload.version);
      return true;
    });
    if (switched) return;
  }
}
