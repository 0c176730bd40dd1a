import { randomUUID } from 'node:crypto';
import { sql, type Kysely, type RawBuilder, type Transaction } from 'kysely';
import type { DB } from '../../db/types.ts';
import type { WebhookEventData, WebhookEventType } from '../../schema/webhooks.ts';

type Db = Kysely<DB> | Transaction<DB>;

export const DELIVER_JOB = 'webhook.deliver';
/** Attempts of the delivery job itself (a crash, a database error); HTTP failures follow schedule.ts instead. */
export const DELIVER_JOB_MAX_ATTEMPTS = 10;

export interface OutboxEvent<T extends WebhookEventType = WebhookEventType> {
  ownerId: string;
  type: T;
  data: WebhookEventData<T>;
}

/** Builds an event for the outbox; typed so each type's data matches the catalogue. */
export const webhookEvent = <T extends WebhookEventType>(ownerId: string, type: T, data: WebhookEventData<T>): OutboxEvent<T> => ({ ownerId, type, data });

/**
 * The outbox call (the `webhook_outbox` function of db/migrations/0004_webhooks.ts) as a set-returning SQL
 * expression of delivery ids, to use in the same statement as the change that causes the events, or alone
 * inside its transaction. With `onlyWebhookId`, that endpoint alone receives the events (the test event).
 */
export function outboxCall(events: OutboxEvent[], options: { onlyWebhookId?: string } = {}): RawBuilder<unknown> {
  return sql`webhook_outbox(${outboxEventsJson(events)}, ${options.onlyWebhookId ?? null}::uuid, ${DELIVER_JOB}::text, ${DELIVER_JOB_MAX_ATTEMPTS}::int)`;
}

/** The events as the outbox function takes them: [{id, owner_id, type, body}], the body being the exact bytes sent. */
export function outboxEventsJson(events: OutboxEvent[]): RawBuilder<unknown> {
  const rows = events.map((e) => {
    const id = randomUUID();
    const body = JSON.stringify({ id, type: e.type, timestamp: new Date().toISOString(), data: e.data });
    return { id, owner_id: e.ownerId, type: e.type, body };
  });
  return sql`cast(${JSON.stringify(rows)}::text as jsonb)`;
}

/**
 * Records events in the outbox (run it inside the transaction of the change). Returns the deliveries
 * queued, so the caller can wake the job queue after commit when there are any.
 */
export async function recordEvents(db: Db, events: OutboxEvent[], options: { onlyWebhookId?: string } = {}): Promise<{ queued: number; deliveryIds: string[] }> {
  if (events.length === 0) return { queued: 0, deliveryIds: [] };
  const { rows } = await sql<{ id: string }>`select d as id from ${outboxCall(events, options)} d`.execute(db);
  return { queued: rows.length, deliveryIds: rows.map((r) => r.id) };
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
