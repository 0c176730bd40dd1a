import { sql, type Kysely } from 'kysely';
import { createRecordChatExchange } from './0007_visitors.ts';

/**
 * Usage per owner and calendar month (UTC): visitor messages, knowledge-base queries and the tokens their
 * answers consumed, the "token consumption used for billing" of the spec. The chat turn counts itself inside
 * its one statement (record_chat_exchange), so metering adds no round trip to the hot path.
 */
export async function up(db: Kysely<any>) {
  await db.schema
    .createTable('usage_periods')
    .addColumn('owner_id', 'uuid', (c) => c.notNull().references('owners.id').onDelete('cascade'))
    .addColumn('period_start', 'date', (c) => c.notNull())
    .addColumn('messages', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('queries', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('tokens_in', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('tokens_out', 'bigint', (c) => c.notNull().defaultTo(0))
    .addPrimaryKeyConstraint('usage_periods_pk', ['owner_id', 'period_start'])
    .execute();

  await sql`drop function record_chat_exchange(text, uuid, uuid, uuid, uuid, text, uuid, text, jsonb, jsonb, jsonb, jsonb, text, int)`.execute(db);
  await createMeteredRecordChatExchange(db);
}

/** The chat turn's statement with monthly usage metering (0015 replaces it and recreates it on the way down). */
export async function createMeteredRecordChatExchange(db: Kysely<any>) {
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
      insert into usage_periods (owner_id, period_start, messages, tokens_in, tokens_out)
      values (p_owner_id, (date_trunc('month', now() at time zone 'utc'))::date, 1,
              coalesce((p_usage->>'promptTokens')::bigint, 0), coalesce((p_usage->>'completionTokens')::bigint, 0))
      on conflict (owner_id, period_start) do update
        set messages = usage_periods.messages + 1,
            tokens_in = usage_periods.tokens_in + excluded.tokens_in,
            tokens_out = usage_periods.tokens_out + excluded.tokens_out;
      if exists (select 1 from webhooks w where w.enabled and w.owner_id = p_owner_id) then
        select count(*)::int into queued from webhook_outbox(p_events, null, p_job_kind, p_job_max_attempts);
      end if;
      return queued;
    end
    $fn$`.execute(db);
}

export async function down(db: Kysely<any>) {
  await sql`drop function record_chat_exchange(text, uuid, uuid, uuid, uuid, text, uuid, text, jsonb, jsonb, jsonb, jsonb, text, int)`.execute(db);
  await createRecordChatExchange(db);
  await db.schema.dropTable('usage_periods').ifExists().execute();
}
