import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<any>) {
  await db.schema
    .createTable('chat_sessions')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('chat_interface_id', 'uuid', (c) => c.notNull().references('chat_interfaces.id').onDelete('cascade'))
    .addColumn('owner_id', 'uuid', (c) => c.notNull().references('owners.id').onDelete('cascade'))
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('last_message_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema.createIndex('chat_sessions_interface_idx').on('chat_sessions').columns(['chat_interface_id', 'last_message_at']).execute();

  await db.schema
    .createTable('chat_messages')
    .addColumn('id', 'uuid', (c) => c.primaryKey())
    // Insertion order: timestamps of messages written in one transaction can be equal.
    .addColumn('seq', 'bigint', (c) => c.notNull().generatedAlwaysAsIdentity())
    .addColumn('session_id', 'text', (c) => c.notNull().references('chat_sessions.id').onDelete('cascade'))
    .addColumn('role', 'text', (c) => c.notNull().check(sql`role in ('user','assistant','operator')`))
    .addColumn('content', 'text', (c) => c.notNull())
    .addColumn('sources', 'jsonb', (c) => c.notNull().defaultTo(sql`'[]'::jsonb`))
    .addColumn('usage', 'jsonb')
    .addColumn('tool_calls', 'jsonb', (c) => c.notNull().defaultTo(sql`'[]'::jsonb`))
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`clock_timestamp()`))
    .execute();
  await db.schema.createIndex('chat_messages_session_idx').on('chat_messages').columns(['session_id', 'seq']).execute();
}

export async function down(db: Kysely<any>) {
  await db.schema.dropTable('chat_messages').ifExists().execute();
  await db.schema.dropTable('chat_sessions').ifExists().execute();
}
