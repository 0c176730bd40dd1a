import { randomUUID } from 'node:crypto';
import { sql, type Kysely, type RawBuilder, type Transaction } from 'kysely';
import type { DB } from '../../db/types.ts';
import type { WebhookEventData, WebhookEventType } from '../../schema/webhooks.ts';

type Db = Kysely<DB> | Transaction<DB>;

/** The job kind the outbox function enqueues for each delivery. */
export const DELIVER_JOB = 'webhook.deliver';
/** A delivery job's fair key: its owner, in the deliveries' own key space (the outbox function writes the same). */
export const WEBHOOK_FAIR_KEY_PREFIX = 'webhook:';
export const webhookFairKey = (ownerId: string) => `${WEBHOOK_FAIR_KEY_PREFIX}${ownerId}`;

/** Attempts of the delivery job itself (a crash, a database error); HTTP failures follow schedule.ts instead. */
export const DELIVER_JOB_MAX_ATTEMPTS = 10;

export interface OutboxEvent<T extends WebhookEventType = WebhookEventType> {
  ownerId: string;
  type: T;
  data: WebhookEventData<T>;
}

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

/** Runs the outbox function alone; returns the ids of the deliveries it queued. */
export async function insertOutboxEvents(db: Db, events: OutboxEvent[], options: { onlyWebhookId?: string } = {}): Promise<string[]> {
  const { rows } = await sql<{ id: string }>`select d as id from ${outboxCall(events, options)} d`.execute(db);
  return rows.map((r) => r.id);
}
