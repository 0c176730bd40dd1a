import type { AppDeps } from '../context.ts';
import { batchJobHandler, type Job, type JobHandler } from '../jobs/queue.ts';
import { failDocument, ingestDocuments, INGEST_BATCH, type IngestPayload } from './ingest.ts';
import { reembedConfig } from './reembed.ts';
import { findOrphanedDocuments } from './repository.ts';

export const INGEST_JOB = 'kb.ingest';
export const REEMBED_JOB = 'kb.reembed';

export function knowledgeBaseJobHandlers(deps: AppDeps): Record<string, JobHandler> {
  return {
    // Batched: under a backlog, documents are claimed, embedded and written many at a time.
    [INGEST_JOB]: batchJobHandler<IngestPayload>(INGEST_BATCH, (jobs: Array<Job<IngestPayload>>, ctx) => ingestDocuments(deps, jobs, ctx)),
    [REEMBED_JOB]: (job, ctx) => reembedConfig(deps, job as Parameters<typeof reembedConfig>[1], ctx),
  };
}

/**
 * After a crash, a document may be `processing` with its job already dead or gone. Start-up gives every
 * such document a job again (dedupe keys stop duplicates), so none stays `processing` for ever.
 */
export async function requeueOrphanedDocuments(deps: Pick<AppDeps, 'database' | 'jobs' | 'webhookJobs'>): Promise<number> {
  const rows = await findOrphanedDocuments(deps.database.db, INGEST_JOB);
  for (const doc of rows) {
    // A job that already used up its attempts (for instance, each one crashed the process) ends the document.
    if (doc.dead) {
      await failDocument(deps, doc.id, `Processing failed repeatedly: ${doc.dead_error ?? 'the worker stopped while processing it'}`);
      continue;
    }
    await deps.jobs.enqueue(INGEST_JOB, { documentId: doc.id, configId: doc.config_id } satisfies IngestPayload, { dedupeKey: `ingest:${doc.id}` });
  }
  if (rows.length > 0) deps.jobs.notify();
  return rows.length;
}

export type { IngestPayload };
