import { sql, type Kysely } from 'kysely';

/**
 * Bookings. The database is the last word on double booking: two confirmed, exclusive bookings of one chat
 * interface can never overlap in time (an exclusion constraint over a time range, which needs btree_gist for the
 * uuid equality). Buffers, the day cap and the availability rules are checked under a per-interface advisory lock.
 */
export async function up(db: Kysely<any>) {
  await sql`create extension if not exists btree_gist`.execute(db);
  await db.schema
    .createTable('booking_availability')
    .addColumn('chat_interface_id', 'uuid', (c) => c.primaryKey().references('chat_interfaces.id').onDelete('cascade'))
    .addColumn('owner_id', 'uuid', (c) => c.notNull().references('owners.id').onDelete('cascade'))
    .addColumn('time_zone', 'text', (c) => c.notNull())
    .addColumn('weekly', 'jsonb', (c) => c.notNull())
    .addColumn('overrides', 'jsonb', (c) => c.notNull())
    .addColumn('slot_minutes', 'integer', (c) => c.notNull())
    .addColumn('interval_minutes', 'integer', (c) => c.notNull())
    .addColumn('buffer_before_minutes', 'integer', (c) => c.notNull())
    .addColumn('buffer_after_minutes', 'integer', (c) => c.notNull())
    .addColumn('min_notice_minutes', 'integer', (c) => c.notNull())
    .addColumn('max_days_ahead', 'integer', (c) => c.notNull())
    .addColumn('max_per_day', 'integer')
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema
    .createTable('bookings')
    .addColumn('id', 'uuid', (c) => c.primaryKey())
    .addColumn('owner_id', 'uuid', (c) => c.notNull().references('owners.id').onDelete('cascade'))
    .addColumn('chat_interface_id', 'uuid', (c) => c.notNull().references('chat_interfaces.id').onDelete('cascade'))
    .addColumn('status', 'text', (c) => c.notNull().check(sql`status in ('confirmed', 'cancelled')`))
    .addColumn('source', 'text', (c) => c.notNull().check(sql`source in ('api', 'manual', 'chat')`))
    .addColumn('start_at', 'timestamptz', (c) => c.notNull())
    .addColumn('end_at', 'timestamptz', (c) => c.notNull())
    .addColumn('exclusive', 'boolean', (c) => c.notNull().defaultTo(true))
    .addColumn('attendee_name', 'text', (c) => c.notNull())
    .addColumn('attendee_email', 'text', (c) => c.notNull())
    .addColumn('attendee_phone', 'text')
    .addColumn('attendee_time_zone', 'text', (c) => c.notNull())
    .addColumn('notes', 'text')
    .addColumn('visitor_id', 'uuid')
    .addColumn('session_id', 'text')
    .addColumn('cancel_token_hash', 'text', (c) => c.notNull().unique())
    .addColumn('sequence', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('cancel_reason', 'text')
    .addColumn('cancelled_by', 'text')
    .addColumn('cancelled_at', 'timestamptz')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`date_trunc('milliseconds', now())`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addCheckConstraint('bookings_time_order', sql`end_at > start_at`)
    .execute();
  await sql`alter table bookings add constraint bookings_no_overlap exclude using gist
    (chat_interface_id with =, tstzrange(start_at, end_at) with &&) where (status = 'confirmed' and exclusive)`.execute(db);
  await db.schema.createIndex('bookings_owner_start_idx').on('bookings').columns(['owner_id', 'start_at']).execute();
  await db.schema.createIndex('bookings_interface_start_idx').on('bookings').columns(['chat_interface_id', 'start_at']).execute();
}

export async function down(db: Kysely<any>) {
  for (const table of ['bookings', 'booking_availability']) await db.schema.dropTable(table).ifExists().execute();
}
