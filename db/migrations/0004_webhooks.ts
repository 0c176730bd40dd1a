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
    // AES-256-GCM ciphertexts (server/secrets.ts) of `whsec_…` secrets; the previous one signs too until it expires.
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
}

export async function down(db: Kysely<any>) {
  await db.schema.dropTable('webhook_deliveries').ifExists().execute();
  await db.schema.dropTable('webhook_events').ifExists().execute();
  await db.schema.dropTable('webhooks').ifExists().execute();
}
