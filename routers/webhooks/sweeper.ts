import type { Kysely } from 'kysely';
import type { DB, WebhookAttempt } from '../../db/types.ts';
import type { JobQueue } from '../jobs/queue.ts';
import { DELIVER_JOB, DELIVER_JOB_MAX_ATTEMPTS, webhookFairKey } from './outbox-repository.ts';
import { appendFinalAttempt, findOrphanedDeliveries } from './repository.ts';

const BATCH = 500;

/**
 * A delivery still owed an attempt must always have a job. One can lose it only by extraordinary means (its job
 * died after repeated crashes of the handler itself, or someone cleared the jobs table): a delivery whose job
 * is dead is ended as `failed` with the reason (the owner can replay it); one with no job at all gets a new one.
 * Runs at start-up and periodically. Returns how many deliveries it touched.
 */
export async function sweepOrphanedDeliveries(db: Kysely<DB>, jobs: Pick<JobQueue, 'enqueue' | 'notify'>): Promise<number> {
  const rows = await findOrphanedDeliveries(db, DELIVER_JOB, BATCH);
  for (const delivery of rows) {
    if (delivery.dead) {
      const attempt: WebhookAttempt = {
        at: new Date().toISOString(),
        trigger: 'automatic',
        httpStatus: null,
        latencyMs: 0,
        responseExcerpt: null,
        error: `Delivery stopped after repeated internal errors: ${delivery.dead_error ?? 'unknown'}`,
      };
      await appendFinalAttempt(db, delivery.id, attempt);
      continue;
    }
    await jobs.enqueue(
      DELIVER_JOB,
      { deliveryId: delivery.id },
      {
        dedupeKey: `webhook:${delivery.id}`,
        maxAttempts: DELIVER_JOB_MAX_ATTEMPTS,
        fairKey: webhookFairKey(delivery.owner_id),
      },
    );
  }
  if (rows.length > 0) jobs.notify();
  return rows.length;
}
