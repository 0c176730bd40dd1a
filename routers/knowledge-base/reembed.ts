import type { AppDeps } from '../context.ts';
import type { Job, JobContext } from '../jobs/handler.ts';
import { webhookEvent, withEvents } from '../webhooks/outbox.ts';
import { documentEmbedderFor } from './embedders.ts';
import { insertVectors } from './vectors.ts';
import { chunksWithoutVector, countChunksWithoutVector, failEmbeddingSwitch, lockEmbeddingVersion, switchServingVersion } from './reembed-repository.ts';
import { findConfigById, toKbConfig } from './repository.ts';

export interface ReembedPayload {
  configId: string;
  version: number;
}

type ReembedDeps = Pick<AppDeps, 'database' | 'documentPool' | 'http' | 'secrets' | 'webhookJobs'>;

const BATCH = 64;
/** The reason is shown to the owner on the configuration; an upstream's excerpt is already short. */
const MAX_REASON_LENGTH = 1_000;

/**
 * Re-embeds every chunk of a configuration under its new embedding version, in batches (resumable: chunks
 * already embedded for that version are skipped). Queries keep reading serving_version until the last
 * chunk is done; then serving switches and the old vectors are dropped. When the last attempt fails, the switch
 * is recorded as failed (the old model keeps serving) instead of leaving the configuration re-embedding for ever.
 */
export async function reembedConfig(deps: ReembedDeps, job: Job<ReembedPayload>, ctx: JobContext): Promise<void> {
  try {
    await reembed(deps, job, ctx);
  } catch (error) {
    // Aborted by the queue (stop() or a lost lease): the job is released or taken over, so the switch goes on. A
    // final attempt that never gets here (the process died) is found by the sweep (routers/knowledge-base/jobs.ts).
    if (!ctx.signal.aborted && job.attempts >= job.maxAttempts) {
      const reason = error instanceof Error ? error.message || error.name : String(error);
      await failEmbeddingSwitchWithEvent(deps, job.payload, `Re-embedding stopped after ${job.attempts} attempts: ${reason}`);
    }
    throw error;
  }
}

async function reembed(deps: ReembedDeps, job: Job<ReembedPayload>, ctx: JobContext): Promise<void> {
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
    const { done } = await withEvents(
      deps,
      async (trx) => {
        if ((await lockEmbeddingVersion(trx, config.id)) !== job.payload.version) return { done: true };
        if ((await countChunksWithoutVector(trx, config.id, job.payload.version)) > 0) return { done: false };
        return { done: true, switched: await switchServingVersion(trx, config.id, job.payload.version) };
      },
      // The serving model changed: subscribers learn that the switch finished, as they learn when it failed.
      ({ switched }) => (switched ? [webhookEvent(switched.owner_id, 'knowledge_base.updated', toKbConfig(switched))] : []),
    );
    if (done) return;
  }
}

/**
 * Ends a switch that cannot finish: the configuration shows why and stops re-embedding, the old model keeps
 * serving, and `knowledge_base.updated` tells subscribers. A no-op when the switch already ended or moved on to
 * another version; with `unlessActiveJob`, also while a re-embedding job of that kind for it is queued or running.
 */
export async function failEmbeddingSwitchWithEvent(
  deps: Pick<AppDeps, 'database' | 'webhookJobs'>,
  switchTo: ReembedPayload,
  reason: string,
  unlessActiveJob?: string,
) {
  return withEvents(
    deps,
    (trx) => failEmbeddingSwitch(trx, switchTo.configId, switchTo.version, reason.slice(0, MAX_REASON_LENGTH), unlessActiveJob),
    (failed) => (failed ? [webhookEvent(failed.owner_id, 'knowledge_base.updated', toKbConfig(failed))] : []),
  );
}
