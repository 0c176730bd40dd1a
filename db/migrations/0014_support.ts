import { sql, type Kysely } from 'kysely';

/**
 * Support tickets: from the public contact form (to the service's admins) or as a hand-off from a chat
 * interface's visitor (to that interface's owner, with the conversation attached), and their message thread.
 */
export async function up(db: Kysely<any>) {
  await db.schema
    .createTable('support_tickets')
    .addColumn('id', 'uuid', (c) => c.primaryKey())
    .addColumn('reference', 'text', (c) => c.notNull().unique())
    .addColumn('owner_id', 'uuid', (c) => c.references('owners.id').onDelete('cascade'))
    .addColumn('chat_interface_id', 'uuid', (c) => c.references('chat_interfaces.id').onDelete('set null'))
    .addColumn('session_id', 'text')
    .addColumn('transcript', 'jsonb')
    .addColumn('requester_name', 'text', (c) => c.notNull())
    .addColumn('requester_email', 'text', (c) => c.notNull())
    .addColumn('subject', 'text', (c) => c.notNull())
    .addColumn('category', 'text')
    .addColumn('status', 'text', (c) => c.notNull().check(sql`status in ('open', 'pending', 'resolved', 'closed')`))
    .addColumn('priority', 'text', (c) => c.notNull().check(sql`priority in ('low', 'normal', 'high', 'urgent')`))
    .addColumn('assignee', 'text')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`date_trunc('milliseconds', now())`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema.createIndex('support_tickets_owner_idx').on('support_tickets').columns(['owner_id', 'created_at']).execute();
  await db.schema.createIndex('support_tickets_created_idx').on('support_tickets').columns(['created_at', 'id']).execute();
  await db.schema
    .createTable('support_messages')
    .addColumn('id', 'uuid', (c) => c.primaryKey())
    .addColumn('ticket_id', 'uuid', (c) => c.notNull().references('support_tickets.id').onDelete('cascade'))
    .addColumn('author', 'text', (c) => c.notNull().check(sql`author in ('requester', 'owner', 'admin')`))
    .addColumn('author_id', 'uuid')
    .addColumn('body', 'text', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`clock_timestamp()`))
    .execute();
  await db.schema.createIndex('support_messages_ticket_idx').on('support_messages').columns(['ticket_id', 'created_at']).execute();
}

export async function down(db: Kysely<any>) {
  for (const table of ['support_messages', 'support_tickets']) await db.schema.dropTable(table).ifExists().execute();
}
