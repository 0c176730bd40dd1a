import { sql, type Kysely } from 'kysely';

/** "No owner" / "no interface" in the counts' primary key (a key column cannot be null). */
export const NIL_UUID = '00000000-0000-0000-0000-000000000000';

/**
 * Security monitoring: events as they happen (a sample when they flood) and exact counts per hour, kind, owner and
 * interface. No foreign keys: an event outlives the owner or interface it names, and the ids come from requests
 * (a visitor token may name an interface deleted since).
 */
export async function up(db: Kysely<any>) {
  await db.schema
    .createTable('security_events')
    .addColumn('id', 'uuid', (c) => c.primaryKey())
    .addColumn('kind', 'text', (c) => c.notNull())
    .addColumn('occurred_at', 'timestamptz', (c) => c.notNull())
    .addColumn('owner_id', 'uuid')
    .addColumn('chat_interface_id', 'uuid')
    .addColumn('ip', 'text')
    .addColumn('detail', 'jsonb', (c) => c.notNull().defaultTo(sql`'{}'::jsonb`))
    .execute();
  await sql`create index security_events_occurred_idx on security_events (occurred_at desc)`.execute(db);
  await sql`create index security_events_kind_occurred_idx on security_events (kind, occurred_at desc)`.execute(db);
  await db.schema
    .createTable('security_event_counts')
    .addColumn('hour', 'timestamptz', (c) => c.notNull())
    .addColumn('kind', 'text', (c) => c.notNull())
    .addColumn('owner_id', 'uuid', (c) => c.notNull().defaultTo(sql`${sql.lit(NIL_UUID)}::uuid`))
    .addColumn('chat_interface_id', 'uuid', (c) => c.notNull().defaultTo(sql`${sql.lit(NIL_UUID)}::uuid`))
    .addColumn('count', 'bigint', (c) => c.notNull())
    .addPrimaryKeyConstraint('security_event_counts_pk', ['hour', 'kind', 'owner_id', 'chat_interface_id'])
    .execute();
}

export async function down(db: Kysely<any>) {
  for (const table of ['security_event_counts', 'security_events']) await db.schema.dropTable(table).ifExists().execute();
}
