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
 * The outbox as common table expressions, to put in the same statement as the change that causes the events
 * (or run alone inside its transaction): for each event, every enabled endpoint of its owner subscribed to
 * its type (or `*`) gets a delivery row and a delivery job. An event nobody subscribes to is not stored at all.
 * Data-modifying CTEs always run to completion, so the enclosing statement may select from them or not; `wh_deliveries` has one row per delivery queued. With `onlyWebhookId`, that endpoint alone
 * receives the events, subscribed or not (the test event).
 *
 * Jobs are inserted here directly rather than through JobQueue.enqueue so all of this is one statement; the
 * rows follow the queue's contract (status and run_at default to queued/now, dedupe key per delivery).
 */
export function outboxCtes(events: OutboxEvent[], options: { onlyWebhookId?: string } = {}): RawBuilder<unknown> {
  const rows = events.map((e) => {
    const id = randomUUID();
    const body = JSON.stringify({ id, type: e.type, timestamp: new Date().toISOString(), data: e.data });
    return { id, owner_id: e.ownerId, type: e.type, body };
  });
  const targetFilter = options.onlyWebhookId
    ? sql`w.id = ${options.onlyWebhookId}::uuid`
    : sql`w.enabled and (e.type = any(w.events) or '*' = any(w.events))`;
  return sql`
    wh_input as (
      select * from jsonb_to_recordset(cast(${JSON.stringify(rows)}::text as jsonb)) as e(id uuid, owner_id uuid, type text, body text)
    ),
    wh_targets as materialized (
      select gen_random_uuid() as delivery_id, e.id as event_id, w.id as webhook_id, e.owner_id
        from wh_input e join webhooks w on w.owner_id = e.owner_id
       where ${targetFilter}
    ),
    wh_events as (
      insert into webhook_events (id, owner_id, type, body)
      select e.id, e.owner_id, e.type, e.body from wh_input e where exists (select 1 from wh_targets t where t.event_id = e.id)
      returning id
    ),
    wh_deliveries as (
      insert into webhook_deliveries (id, webhook_id, event_id, owner_id)
      select t.delivery_id, t.webhook_id, t.event_id, t.owner_id from wh_targets t
      returning id
    ),
    wh_jobs as (
      insert into jobs (id, kind, payload, max_attempts, dedupe_key)
      select gen_random_uuid(), ${DELIVER_JOB}, jsonb_build_object('deliveryId', d.id), ${DELIVER_JOB_MAX_ATTEMPTS}::int, 'webhook:' || d.id::text
        from wh_deliveries d
      returning id
    )`;
}

/**
 * Records events in the outbox (run it inside the transaction of the change). Returns the deliveries
 * queued, so the caller can wake the job queue after commit when there are any.
 */
export async function recordEvents(db: Db, events: OutboxEvent[], options: { onlyWebhookId?: string } = {}): Promise<{ queued: number; deliveryIds: string[] }> {
  if (events.length === 0) return { queued: 0, deliveryIds: [] };
  const { rows } = await sql<{ id: string }>`with ${outboxCtes(events, options)} select id from wh_deliveries`.execute(db);
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
