import { sql } from 'kysely';
import type { AppDeps } from '../context.ts';
import type { JobHandler } from '../../server/jobs/queue.ts';
import { failDocument, ingestDocument, type IngestPayload } from './ingest.ts';
import { reembedConfig, type ReembedPayload } from './reembed.ts';

export const INGEST_JOB = 'kb.ingest';
export const REEMBED_JOB = 'kb.reembed';

export function knowledgeBaseJobHandlers(deps: AppDeps): Record<string, JobHandler> {
  return {
    [INGEST_JOB]: (job, ctx) => ingestDocument(deps, job as Parameters<typeof ingestDocument>[1], ctx),
    [REEMBED_JOB]: (job, ctx) => reembedConfig(deps, job as Parameters<typeof reembedConfig>[1], ctx),
  };
}

/**
 * After a crash, a document may be `processing` with its job already dead or gone. Start-up gives every
 * such document a job again (dedupe keys stop duplicates), so none stays `processing` for ever.
 */
export async function requeueOrphanedDocuments(deps: AppDeps): Promise<number> {
  const { rows } = await sql<{ id: string; config_id: string; dead_error: string | null; dead: boolean }>`
    select d.id, d.config_id,
      exists (select 1 from jobs j where j.kind = ${INGEST_JOB} and j.status = 'dead' and j.payload->>'documentId' = d.id::text) as dead,
      (select j.last_error from jobs j where j.kind = ${INGEST_JOB} and j.status = 'dead' and j.payload->>'documentId' = d.id::text order by j.updated_at desc limit 1) as dead_error
    from kb_documents d
    where d.status = 'processing'
      and not exists (
        select 1 from jobs j
        where j.kind = ${INGEST_JOB} and j.status in ('queued', 'running') and j.payload->>'documentId' = d.id::text
      )`.execute(deps.database.db);
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

export type { IngestPayload, ReembedPayload };
