import { sql, type Kysely } from 'kysely';

/**
 * Visitors of public chat interfaces (the hosted page and the widget) and the leads they leave. A visitor is
 * anonymous: an id, the interface it belongs to, and the hash of its resume token (the long-lived secret the
 * browser keeps to come back to its conversations). Sessions remember their visitor, so a visitor reads only
 * its own conversations.
 */
export async function up(db: Kysely<any>) {
  await db.schema
    .alterTable('chat_interfaces')
    .addColumn('public', 'boolean', (c) => c.notNull().defaultTo(false))
    .execute();
  await db.schema
    .alterTable('chat_interfaces')
    .addColumn('allowed_origins', sql`text[]`, (c) => c.notNull().defaultTo(sql`'{}'::text[]`))
    .execute();

  await db.schema
    .createTable('visitors')
    .addColumn('id', 'uuid', (c) => c.primaryKey())
    .addColumn('chat_interface_id', 'uuid', (c) => c.notNull().references('chat_interfaces.id').onDelete('cascade'))
    .addColumn('owner_id', 'uuid', (c) => c.notNull().references('owners.id').onDelete('cascade'))
    // SHA-256 of the resume token: the token itself is shown once, to the browser that asked for it.
    .addColumn('resume_hash', 'text', (c) => c.notNull().unique())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('last_seen_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();

  await db.schema
    .alterTable('chat_sessions')
    .addColumn('visitor_id', 'uuid', (c) => c.references('visitors.id').onDelete('set null'))
    .execute();
  await db.schema.createIndex('chat_sessions_visitor_idx').on('chat_sessions').columns(['visitor_id', 'last_message_at']).execute();

  await db.schema
    .createTable('leads')
    .addColumn('id', 'uuid', (c) => c.primaryKey())
    .addColumn('owner_id', 'uuid', (c) => c.notNull().references('owners.id').onDelete('cascade'))
    .addColumn('chat_interface_id', 'uuid', (c) => c.notNull().references('chat_interfaces.id').onDelete('cascade'))
    .addColumn('visitor_id', 'uuid', (c) => c.references('visitors.id').onDelete('set null'))
    .addColumn('session_id', 'text', (c) => c.references('chat_sessions.id').onDelete('set null'))
    .addColumn('fields', 'jsonb', (c) => c.notNull())
    // Milliseconds, as the API shows them: a page cursor made of the shown time then never falls between two rows.
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`date_trunc('milliseconds', clock_timestamp())`))
    .execute();
  await db.schema.createIndex('leads_owner_idx').on('leads').columns(['owner_id', 'created_at', 'id']).execute();

  // The chat turn's function learns the visitor: a new session made by a visitor belongs to it.
  await sql`drop function record_chat_exchange(text, uuid, uuid, uuid, text, uuid, text, jsonb, jsonb, jsonb, jsonb, text, int)`.execute(db);
  await createRecordChatExchange(db);
}

export async function down(db: Kysely<any>) {
  await sql`drop function if exists record_chat_exchange(text, uuid, uuid, uuid, uuid, text, uuid, text, jsonb, jsonb, jsonb, jsonb, text, int)`.execute(db);
  await db.schema.dropTable('leads').ifExists().execute();
  await db.schema.dropIndex('chat_sessions_visitor_idx').ifExists().execute();
  await db.schema.alterTable('chat_sessions').dropColumn('visitor_id').execute();
  await db.schema.dropTable('visitors').ifExists().execute();
  await db.schema.alterTable('chat_interfaces').dropColumn('allowed_origins').execute();
  await db.schema.alterTable('chat_interfaces').dropColumn('public').execute();
}

/** The chat turn's one statement as of this migration (0008 replaces it and restores it on the way down). */
export async function createRecordChatExchange(db: Kysely<any>) {
  await sql`
    create function record_chat_exchange(
      p_session_id text, p_chat_interface_id uuid, p_owner_id uuid, p_visitor_id uuid,
      p_message_id uuid, p_message text, p_reply_id uuid, p_reply text,
      p_sources jsonb, p_usage jsonb, p_tool_calls jsonb,
      p_events jsonb, p_job_kind text, p_job_max_attempts int)
    returns int language plpgsql as $fn$
    declare
      queued int := 0;
    begin
      insert into chat_sessions (id, chat_interface_id, owner_id, visitor_id, last_message_at)
      values (p_session_id, p_chat_interface_id, p_owner_id, p_visitor_id, now())
      on conflict (id) do update set last_message_at = excluded.last_message_at;
      insert into chat_messages (id, session_id, role, content, sources, usage, tool_calls)
      values (p_message_id, p_session_id, 'user', p_message, '[]'::jsonb, null, '[]'::jsonb);
      insert into chat_messages (id, session_id, role, content, sources, usage, tool_calls)
      values (p_reply_id, p_session_id, 'assistant', p_reply, p_sources, p_usage, p_tool_calls);
      if exists (select 1 from webhooks w where w.enabled and w.owner_id = p_owner_id) then
        select count(*)::int into queued from webhook_outbox(p_events, null, p_job_kind, p_job_max_attempts);
      end if;
      return queued;
    end
    $fn$`.execute(db);
}
