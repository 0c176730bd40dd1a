import { sql, type Kysely } from 'kysely';
import type { DB, WebhookAttempt } from '../../db/types.ts';
import type { JobQueue } from '../../server/jobs/queue.ts';
import { DELIVER_JOB, DELIVER_JOB_MAX_ATTEMPTS } from './outbox.ts';

const BATCH = 500;

/**
 * A delivery still owed an attempt must always have a job. One can lose it only by extraordinary means (its job
 * died after repeated crashes of the handler itself, or someone cleared the jobs table): a delivery whose job
 * is dead is ended as `failed` with the reason (the owner can replay it); one with no job at all gets a new one.
 * Runs at start-up and periodically. Returns how many deliveries it touched.
 */
export async function sweepOrphanedDeliveries(db: Kysely<DB>, jobs: Pick<JobQueue, 'enqueue' | 'notify'>): Promise<number> {
  const { rows } = await sql<{ id: string; dead_error: string | null; dead: boolean }>`
    select d.id,
      exists (select 1 from jobs j where j.kind = ${DELIVER_JOB} and j.status = 'dead' and j.dedupe_key = 'webhook:' || d.id::text) as dead,
      (select j.last_error from jobs j where j.kind = ${DELIVER_JOB} and j.status = 'dead' and j.dedupe_key = 'webhook:' || d.id::text order by j.updated_at desc limit 1) as dead_error
    from webhook_deliveries d
    where (d.status = 'pending' or (d.status = 'failed' and d.next_attempt_at is not null))
      and d.created_at < now() - interval '5 seconds'
      and not exists (select 1 from jobs j where j.dedupe_key = 'webhook:' || d.id::text and j.status in ('queued', 'running'))
    limit ${BATCH}`.execute(db);
  for (const delivery of rows) {
    if (delivery.dead) {
      const attempt: WebhookAttempt = { at: new Date().toISOString(), trigger: 'automatic', httpStatus: null, latencyMs: 0, responseExcerpt: null, error: `Delivery stopped after repeated internal errors: ${delivery.dead_error ?? 'unknown'}` };
      await db
        .updateTable('webhook_deliveries')
        .set({ status: 'failed', next_attempt_at: null, attempts: sql<string>`attempts || jsonb_build_array(cast(${JSON.stringify(attempt)}::text as jsonb))`, updated_at: new Date() })
        .where('id', '=', delivery.id)
        .execute();
      continue;
    }
    await jobs.enqueue(DELIVER_JOB, { deliveryId: delivery.id }, { dedupeKey: `webhook:${delivery.id}`, maxAttempts: DELIVER_JOB_MAX_ATTEMPTS });
  }
  if (rows.length > 0) jobs.notify();
  return rows.length;
}
