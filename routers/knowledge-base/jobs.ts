import type { Kysely, Transaction } from 'kysely';
import type { DB } from '../../db/types.ts';
import type { AppDeps } from '../context.ts';
import { batchJobHandler, type Job, type JobHandler } from '../jobs/handler.ts';
import type { JobQueue } from '../jobs/queue.ts';
import { failDocument, ingestDocuments, INGEST_BATCH, type IngestPayload } from './ingest.ts';
import { failEmbeddingSwitchWithEvent, reembedConfig, type ReembedPayload } from './reembed.ts';
import { findOrphanedDocuments } from './ingest-repository.ts';
import { findStalledEmbeddingSwitches } from './reembed-repository.ts';

export const INGEST_JOB = 'kb.ingest';
export const REEMBED_JOB = 'kb.reembed';

export function knowledgeBaseJobHandlers(deps: AppDeps): Record<string, JobHandler> {
  return {
    // Batched: under a backlog, documents are claimed, embedded and written many at a time.
    [INGEST_JOB]: batchJobHandler<IngestPayload>(INGEST_BATCH, (jobs: Array<Job<IngestPayload>>, ctx) => ingestDocuments(deps, jobs, ctx)),
    [REEMBED_JOB]: (job, ctx) => reembedConfig(deps, job as Job<ReembedPayload>, ctx),
  };
}

/** A document job's fair key: its owner, in the documents' own key space (the migration that keyed jobs says the same). */
export const DOCUMENT_FAIR_KEY_PREFIX = 'document:';
export const documentFairKey = (ownerId: string) => `${DOCUMENT_FAIR_KEY_PREFIX}${ownerId}`;

/**
 * How many document jobs of one owner the background workers may hold at once: every worker a full batch, so one
 * owner's bulk upload is not slowed; what fairness buys (the queue's claims put the owners with the fewest running
 * first) is that another owner's upload joins the next batch instead of waiting behind the whole backlog.
 */
export const documentJobsPerOwner = (workers: number) => INGEST_BATCH * Math.max(1, workers);

/**
 * Queues the re-embedding of a configuration to its target `version` (pass the transaction of the change that
 * made it the target). One job per switch at a time: while one is queued or running, this is a no-op.
 */
export const queueReembedding = (jobs: Pick<JobQueue, 'enqueue'>, switchTo: ReembedPayload, db?: Kysely<DB> | Transaction<DB>) =>
  jobs.enqueue(REEMBED_JOB, { configId: switchTo.configId, version: switchTo.version }, { dedupeKey: `reembed:${switchTo.configId}:${switchTo.version}` }, db);

/**
 * After a crash, a document may be `processing` with its job already dead or gone. Start-up gives every
 * such document a job again (dedupe keys stop duplicates), so none stays `processing` for ever. The same sweep
 * (run at start-up and periodically by server/app.ts) ends or resumes embedding-model switches left without a job.
 */
export async function requeueOrphanedDocuments(deps: Pick<AppDeps, 'database' | 'jobs' | 'webhookJobs'>): Promise<number> {
  const rows = await findOrphanedDocuments(deps.database.db, INGEST_JOB);
  for (const doc of rows) {
    // A job that already used up its attempts (for instance, each one crashed the process) ends the document.
    if (doc.dead) {
      await failDocument(deps, doc.id, `Processing failed repeatedly: ${doc.dead_error ?? 'the worker stopped while processing it'}`);
      continue;
    }
    await deps.jobs.enqueue(INGEST_JOB, { documentId: doc.id, configId: doc.config_id } satisfies IngestPayload, {
      dedupeKey: `ingest:${doc.id}`,
      fairKey: documentFairKey(doc.owner_id),
    });
  }
  const switches = await resumeStalledEmbeddingSwitches(deps);
  if (rows.length > 0 || switches > 0) deps.jobs.notify();
  return rows.length + switches;
}

/**
 * A switch of embedding model whose job is gone without recording a failure: its last job died where the handler
 * could not say so (the process died during the final attempt), which fails the switch with the job's error, as
 * a document's; or it was lost (none, or none left queued or running), which queues the switch again.
 */
async function resumeStalledEmbeddingSwitches(deps: Pick<AppDeps, 'database' | 'jobs' | 'webhookJobs'>): Promise<number> {
  const stalled = await findStalledEmbeddingSwitches(deps.database.db, REEMBED_JOB);
  for (const row of stalled) {
    const switchTo = { configId: row.id, version: row.version };
    if (row.last_status === 'dead') {
      const reason = `Re-embedding failed repeatedly: ${row.last_error ?? 'the worker stopped while re-embedding'}`;
      await failEmbeddingSwitchWithEvent(deps, switchTo, reason, REEMBED_JOB);
      continue;
    }
    await queueReembedding(deps.jobs, switchTo);
  }
  return stalled.length;
}

export type { IngestPayload };
