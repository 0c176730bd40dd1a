import { sql, type Kysely } from 'kysely';

/**
 * The two statements of a visitor's chat turn as PL/pgSQL functions. PGlite plans every ad-hoc statement again
 * (about half a millisecond for these), while a function's plans are prepared once per session; on PostgreSQL,
 * where postgres.js already prepares statements, they cost the same as before. The SQL stays here, in one
 * place; routers/api-keys/repository.ts and routers/chat/repository.ts call it.
 */
export async function up(db: Kysely<any>) {
  // The active key with the chat interface it is bound to.
  await sql`
    create function find_active_api_key(p_key_hash text)
    returns table (id uuid, owner_id uuid, chat_interface_id uuid, last_used_at timestamptz, slug text, config_id text,
                   endpoint_url text, endpoint_type text, endpoint_api_key_enc text)
    language plpgsql stable as $fn$
    begin
      return query
        select k.id, k.owner_id, k.chat_interface_id, k.last_used_at, c.slug, c.config_id, c.endpoint_url,
               c.endpoint_type, c.endpoint_api_key_enc
          from api_keys k join chat_interfaces c on c.id = k.chat_interface_id
         where k.key_hash = p_key_hash and k.active;
    end
    $fn$`.execute(db);

  // One visitor turn, atomically (one statement for the caller): the session is created or touched, the message
  // and the reply are stored in that order, and the turn's webhook events go to the outbox when the owner has
  // an enabled endpoint (one index probe otherwise). Returns the deliveries queued.
  await sql`
    create function record_chat_exchange(
      p_session_id text, p_chat_interface_id uuid, p_owner_id uuid,
      p_message_id uuid, p_message text, p_reply_id uuid, p_reply text,
      p_sources jsonb, p_usage jsonb, p_tool_calls jsonb,
      p_events jsonb, p_job_kind text, p_job_max_attempts int)
    returns int language plpgsql as $fn$
    declare
      queued int := 0;
    begin
      insert into chat_sessions (id, chat_interface_id, owner_id, last_message_at)
      values (p_session_id, p_chat_interface_id, p_owner_id, now())
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

export async function down(db: Kysely<any>) {
  await sql`drop function if exists record_chat_exchange(text, uuid, uuid, uuid, text, uuid, text, jsonb, jsonb, jsonb, jsonb, text, int)`.execute(db);
  await sql`drop function if exists find_active_api_key(text)`.execute(db);
}
