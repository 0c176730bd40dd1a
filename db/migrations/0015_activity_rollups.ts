import { sql, type Kysely } from 'kysely';
import { createMeteredRecordChatExchange } from './0008_usage.ts';

/**
 * Rollups for the owner's dashboard and monitoring, kept as traffic flows so that reading them never scans the
 * messages: counters per owner, interface and UTC day (`activity_daily`, one row per metric; the nil uuid stands
 * for "no interface", e.g. a document failure), the visitors seen per day (unique counts), and the questions the
 * knowledge base found no good source for. The chat turn counts itself inside its one statement.
 */
export async function up(db: Kysely<any>) {
  await db.schema
    .createTable('activity_daily')
    .addColumn('owner_id', 'uuid', (c) => c.notNull().references('owners.id').onDelete('cascade'))
    .addColumn('day', 'date', (c) => c.notNull())
    .addColumn('chat_interface_id', 'uuid', (c) => c.notNull())
    .addColumn('metric', 'text', (c) => c.notNull())
    .addColumn('value', 'bigint', (c) => c.notNull())
    .addPrimaryKeyConstraint('activity_daily_pk', ['owner_id', 'day', 'chat_interface_id', 'metric'])
    .execute();
  await db.schema
    .createTable('activity_visitors')
    .addColumn('owner_id', 'uuid', (c) => c.notNull().references('owners.id').onDelete('cascade'))
    .addColumn('day', 'date', (c) => c.notNull())
    .addColumn('chat_interface_id', 'uuid', (c) => c.notNull())
    .addColumn('visitor_key', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('activity_visitors_pk', ['owner_id', 'day', 'chat_interface_id', 'visitor_key'])
    .execute();
  // A HyperLogLog sketch of the day's visitors (1,024 one-byte registers): distinct visitors over a long range
  // are estimated from a few rows instead of counted over every visitor-day.
  await db.schema
    .createTable('activity_visitor_sketches')
    .addColumn('owner_id', 'uuid', (c) => c.notNull().references('owners.id').onDelete('cascade'))
    .addColumn('day', 'date', (c) => c.notNull())
    .addColumn('chat_interface_id', 'uuid', (c) => c.notNull())
    .addColumn('registers', 'bytea', (c) => c.notNull())
    .addPrimaryKeyConstraint('activity_visitor_sketches_pk', ['owner_id', 'day', 'chat_interface_id'])
    .execute();
  await db.schema
    .createTable('activity_questions')
    .addColumn('owner_id', 'uuid', (c) => c.notNull().references('owners.id').onDelete('cascade'))
    .addColumn('day', 'date', (c) => c.notNull())
    .addColumn('chat_interface_id', 'uuid', (c) => c.notNull())
    .addColumn('question', 'text', (c) => c.notNull())
    .addColumn('count', 'bigint', (c) => c.notNull())
    .addPrimaryKeyConstraint('activity_questions_pk', ['owner_id', 'day', 'chat_interface_id', 'question'])
    .execute();

  // p_activity: {"metrics": {name: n}, "visitor": key?, "question": text?}; the day is today in UTC.
  await sql`
    create function count_activity(p_owner_id uuid, p_chat_interface_id uuid, p_activity jsonb)
    returns void language plpgsql as $fn$
    declare
      today date := (now() at time zone 'utc')::date;
      seen int := 0;
      h bigint;
      reg int;
      rest bigint;
      rnk int;
    begin
      if p_activity ? 'visitor' then
        insert into activity_visitors (owner_id, day, chat_interface_id, visitor_key)
        values (p_owner_id, today, p_chat_interface_id, p_activity->>'visitor')
        on conflict do nothing;
        get diagnostics seen = row_count;
      end if;
      if seen > 0 then
        -- HyperLogLog: the low 10 bits of a 64-bit hash pick the register, the next 54 bits give the rank
        -- (leading zeros + 1); a register keeps the highest rank it saw.
        h := hashtextextended(p_activity->>'visitor', 0);
        reg := (h & 1023)::int;
        rest := (h >> 10) & 18014398509481983;
        rnk := case when rest = 0 then 55 else 54 - floor(log(2.0, rest::numeric))::int end;
        insert into activity_visitor_sketches (owner_id, day, chat_interface_id, registers)
        values (p_owner_id, today, p_chat_interface_id, set_byte(decode(repeat('00', 1024), 'hex'), reg, rnk))
        on conflict (owner_id, day, chat_interface_id) do update
          set registers = set_byte(activity_visitor_sketches.registers, reg,
                                   greatest(get_byte(activity_visitor_sketches.registers, reg), rnk));
      end if;
      insert into activity_daily (owner_id, day, chat_interface_id, metric, value)
      select p_owner_id, today, p_chat_interface_id, m.key, m.value::bigint
      from jsonb_each_text(coalesce(p_activity->'metrics', '{}'::jsonb)) m
      where m.value::bigint <> 0
      union all
      select p_owner_id, today, p_chat_interface_id, 'visitors', 1 where seen > 0
      on conflict (owner_id, day, chat_interface_id, metric) do update set value = activity_daily.value + excluded.value;
      if p_activity ? 'question' then
        insert into activity_questions (owner_id, day, chat_interface_id, question, count)
        values (p_owner_id, today, p_chat_interface_id, p_activity->>'question', 1)
        on conflict (owner_id, day, chat_interface_id, question) do update set count = activity_questions.count + 1;
      end if;
    end
    $fn$`.execute(db);

  await sql`drop function record_chat_exchange(text, uuid, uuid, uuid, uuid, text, uuid, text, jsonb, jsonb, jsonb, jsonb, text, int)`.execute(db);
  await sql`
    create function record_chat_exchange(
      p_session_id text, p_chat_interface_id uuid, p_owner_id uuid, p_visitor_id uuid,
      p_message_id uuid, p_message text, p_reply_id uuid, p_reply text,
      p_sources jsonb, p_usage jsonb, p_tool_calls jsonb,
      p_events jsonb, p_job_kind text, p_job_max_attempts int, p_activity jsonb)
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
      perform count_activity(p_owner_id, p_chat_interface_id, p_activity);
      if exists (select 1 from webhooks w where w.enabled and w.owner_id = p_owner_id) then
        select count(*)::int into queued from webhook_outbox(p_events, null, p_job_kind, p_job_max_attempts);
      end if;
      return queued;
    end
    $fn$`.execute(db);
}

export async function down(db: Kysely<any>) {
  await sql`drop function record_chat_exchange(text, uuid, uuid, uuid, uuid, text, uuid, text, jsonb, jsonb, jsonb, jsonb, text, int, jsonb)`.execute(db);
  await createMeteredRecordChatExchange(db);
  await sql`drop function count_activity(uuid, uuid, jsonb)`.execute(db);
  await db.schema.dropTable('activity_questions').ifExists().execute();
  await db.schema.dropTable('activity_visitor_sketches').ifExists().execute();
  await db.schema.dropTable('activity_visitors').ifExists().execute();
  await db.schema.dropTable('activity_daily').ifExists().execute();
}
