import type { Kysely, Transaction } from 'kysely';
import type { DB } from '../../db/types.ts';
import type { WebhookEventData, WebhookEventType } from '../../schema/webhooks.ts';
import { insertOutboxEvents, type OutboxEvent } from './outbox-repository.ts';

type Db = Kysely<DB> | Transaction<DB>;

/** Builds an event for the outbox; typed so each type's data matches the catalogue. */
export const webhookEvent = <T extends WebhookEventType>(ownerId: string, type: T, data: WebhookEventData<T>): OutboxEvent<T> => ({ ownerId, type, data });

/**
 * Records events in the outbox (run it inside the transaction of the change). Returns the deliveries
 * queued, so the caller can wake the job queue after commit when there are any.
 */
export async function recordEvents(
  db: Db,
  events: OutboxEvent[],
  options: { onlyWebhookId?: string } = {},
): Promise<{ queued: number; deliveryIds: string[] }> {
  if (events.length === 0) return { queued: 0, deliveryIds: [] };
  const deliveryIds = await insertOutboxEvents(db, events, options);
  return { queued: deliveryIds.length, deliveryIds };
}

/**
 * Runs a change and records the events it caused in one transaction (the outbox guarantee: no event without
 * its change, no change without its event), then wakes the delivery workers after commit.
 */
export async function withEvents<T>(
  deps: { database: { db: Kysely<DB> }; webhookJobs: { notify(): void } },
  change: (trx: Transaction<DB>) => Promise<T>,
  events: (result: T) => OutboxEvent[],
): Promise<T> {
  let queued = 0;
  const result = await deps.database.db.transaction().execute(async (trx) => {
    const value = await change(trx);
    queued = (await recordEvents(trx, events(value))).queued;
    return value;
  });
  if (queued > 0) deps.webhookJobs.notify();
  return result;
}
