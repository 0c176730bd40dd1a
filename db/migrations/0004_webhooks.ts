import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<any>) {
  await db.schema
    .createTable('webhooks')
    .addColumn('id', 'uuid', (c) => c.primaryKey())
    .addColumn('owner_id', 'uuid', (c) => c.notNull().references('owners.id').onDelete('cascade'))
    .addColumn('url', 'text', (c) => c.notNull())
    .addColumn('description', 'text')
    // Event types this endpoint receives; '*' means all.
    .addColumn('events', sql`text[]`, (c) => c.notNull())
    .addColumn('enabled', 'boolean', (c) => c.notNull().defaultTo(true))
    // AES-256-GCM ciphertexts (adapters/outbound/secrets.ts) of `whsec_…` secrets; the previous one signs too until it expires.
    .addColumn('secret_enc', 'text', (c) => c.notNull())
    .addColumn('previous_secret_enc', 'text')
    .addColumn('previous_secret_expires_at', 'timestamptz')
    .addColumn('disabled_reason', 'text')
    .addColumn('disabled_at', 'timestamptz')
    // First failure since the last success: five days of failures disable the endpoint.
    .addColumn('failing_since', 'timestamptz')
    .addColumn('last_success_at', 'timestamptz')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema.createIndex('webhooks_owner_idx').on('webhooks').columns(['owner_id', 'created_at']).execute();

  // The outbox: written in the same statement or transaction as the change, only when an endpoint subscribes.
  await db.schema
    .createTable('webhook_events')
    .addColumn('id', 'uuid', (c) => c.primaryKey())
    .addColumn('owner_id', 'uuid', (c) => c.notNull().references('owners.id').onDelete('cascade'))
    .addColumn('type', 'text', (c) => c.notNull())
    // The exact JSON body sent: every attempt and replay sends the same bytes.
    .addColumn('body', 'text', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();

  await db.schema
    .createTable('webhook_deliveries')
    .addColumn('id', 'uuid', (c) => c.primaryKey())
    .addColumn('webhook_id', 'uuid', (c) => c.notNull().references('webhooks.id').onDelete('cascade'))
    .addColumn('event_id', 'uuid', (c) => c.notNull().references('webhook_events.id').onDelete('cascade'))
    .addColumn('owner_id', 'uuid', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull().defaultTo('pending').check(sql`status in ('pending','succeeded','failed','exhausted')`))
    // Automatic attempts made (replays are recorded in `attempts` but not counted here).
    .addColumn('attempt_count', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('attempts', 'jsonb', (c) => c.notNull().defaultTo(sql`'[]'::jsonb`))
    .addColumn('next_attempt_at', 'timestamptz')
    .addColumn('last_attempt_at', 'timestamptz')
    .addColumn('last_http_status', 'integer')
    // Milliseconds, as clients see them: the history's page cursor (created_at, id) must compare exactly.
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`date_trunc('milliseconds', clock_timestamp())`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addUniqueConstraint('webhook_deliveries_once', ['webhook_id', 'event_id'])
    .execute();
  await db.schema.createIndex('webhook_deliveries_history_idx').on('webhook_deliveries').columns(['webhook_id', 'created_at', 'id']).execute();
  await db.schema.createIndex('webhook_deliveries_event_idx').on('webhook_deliveries').column('event_id').execute();
  // The orphan sweep looks only at deliveries still owed an attempt.
  await sql`create index webhook_deliveries_open_idx on webhook_deliveries (created_at) where status in ('pending', 'failed')`.execute(db);

  // The outbox (webhookOutboxFunction below), as a function so its plan is prepared once per session (PGlite re-plans every ad-hoc statement,
  // and this one rides on hot paths such as a chat turn). Given events as JSON [{id, owner_id, type, body}]:
  // for each, every enabled endpoint of its owner subscribed to its type (or '*') gets a delivery row and a
  // delivery job; with p_only_webhook, that endpoint alone, subscribed or not (the test event). An event with
  // no target is not stored. Returns the delivery ids. The job kind and attempts come from the caller
  // (routers/webhooks/outbox.ts), which owns them.
  await webhookOutboxFunction(false).execute(db);
}

/**
 * A delivery job's fair key: its owner, in the webhook deliveries' own key space (routers/webhooks/outbox-repository.ts
 * webhookFairKey says the same in TypeScript), so a queue's keys never count another queue's jobs.
 */
const WEBHOOK_FAIR_KEY_SQL = "'webhook:' || d.owner_id::text";

/**
 * The outbox function's definition; with `withFairKey` (migration 0022) its jobs carry the owner as their fair key, so
 * the delivery workers are shared fairly among owners. Migrations 0004 and 0022 (and 0022's down) create it from here.
 */
export const webhookOutboxFunction = (withFairKey: boolean) => sql`
    create or replace function webhook_outbox(p_events jsonb, p_only_webhook uuid, p_job_kind text, p_job_max_attempts int)
    returns setof uuid language plpgsql as $fn$
    begin
      -- The common case costs one index probe: nobody of these owners has an enabled endpoint.
      if p_only_webhook is null and not exists (
        select 1 from webhooks w
         where w.enabled and w.owner_id in (select (e->>'owner_id')::uuid from jsonb_array_elements(p_events) e)
      ) then
        return;
      end if;
      return query
        with wh_input as (
          select * from jsonb_to_recordset(p_events) as e(id uuid, owner_id uuid, type text, body text)
        ),
        wh_targets as materialized (
          -- Webhooks are an enterprise feature: an owner moved to another plan keeps the endpoints (they come
          -- back with the plan) but receives nothing meanwhile.
          select gen_random_uuid() as delivery_id, e.id as event_id, w.id as webhook_id, e.owner_id
            from wh_input e join webhooks w on w.owner_id = e.owner_id
            join owners o on o.id = w.owner_id and o.plan = 'enterprise'
           where case when p_only_webhook is null then w.enabled and (e.type = any(w.events) or '*' = any(w.events))
                      else w.id = p_only_webhook end
        ),
        wh_events as (
          insert into webhook_events (id, owner_id, type, body)
          select e.id, e.owner_id, e.type, e.body from wh_input e where exists (select 1 from wh_targets t where t.event_id = e.id)
          returning webhook_events.id
        ),
        wh_deliveries as (
          insert into webhook_deliveries (id, webhook_id, event_id, owner_id)
          select t.delivery_id, t.webhook_id, t.event_id, t.owner_id from wh_targets t
          returning webhook_deliveries.id, webhook_deliveries.owner_id
        ),
        -- Rows as JobQueue.enqueue writes them: queued now, one dedupe key per delivery${withFairKey ? sql.raw(', the owner in the fair key') : sql``}.
        wh_jobs as (
          insert into jobs (id, kind, payload, max_attempts, dedupe_key${withFairKey ? sql.raw(', fair_key') : sql``})
          select gen_random_uuid(), p_job_kind, jsonb_build_object('deliveryId', d.id), p_job_max_attempts, 'webhook:' || d.id::text${withFairKey ? sql.raw(`, ${WEBHOOK_FAIR_KEY_SQL}`) : sql``}
            from wh_deliveries d
          returning jobs.id
        )
        select d.id from wh_deliveries d;
    end
    $fn$`;

export async function down(db: Kysely<any>) {
  await sql`drop function if exists webhook_outbox(jsonb, uuid, text, int)`.execute(db);
  await db.schema.dropTable('webhook_deliveries').ifExists().execute();
  await db.schema.dropTable('webhook_events').ifExists().execute();
  await db.schema.dropTable('webhooks').ifExists().execute();
}
