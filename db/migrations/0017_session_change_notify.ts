import { sql, type Kysely } from 'kysely';

/** The channel every instance listens on; the payload names the owner whose cached sessions are dropped ('' for all). */
export const SESSION_CHANGES_CHANNEL = 'session_changes';

/**
 * Changes that can make a cached session wrong notify every instance, on commit, naming the owner: a session deleted
 * (sign-out, revocation, an owner's sessions dropped, cascades from a deleted owner) or its expiry brought forward,
 * and any change to an owner row (password, role, plan, email, a disabled flag), including its deletion. Extending
 * a session (lucia's sliding expiry) does not notify: a cached entry only keeps the older, earlier expiry. TRUNCATE
 * notifies with an empty payload (every session). PostgreSQL folds duplicates within one transaction.
 */
export async function up(db: Kysely<any>) {
  await sql`
    create function notify_session_change() returns trigger language plpgsql as $fn$
    begin
      if tg_op = 'TRUNCATE' then
        perform pg_notify(${sql.lit(SESSION_CHANGES_CHANNEL)}, '');
      elsif tg_table_name = 'owners' then
        perform pg_notify(${sql.lit(SESSION_CHANGES_CHANNEL)}, old.id::text);
      else
        perform pg_notify(${sql.lit(SESSION_CHANGES_CHANNEL)}, old.owner_id::text);
      end if;
      return null;
    end
    $fn$`.execute(db);
  await sql`
    create trigger sessions_changed after update on sessions for each row
    when (new.expires_at < old.expires_at or old.id is distinct from new.id or old.owner_id is distinct from new.owner_id)
    execute function notify_session_change()`.execute(db);
  await sql`create trigger sessions_deleted after delete on sessions for each row execute function notify_session_change()`.execute(db);
  await sql`create trigger owners_changed after update on owners for each row when (old is distinct from new) execute function notify_session_change()`.execute(
    db,
  );
  await sql`create trigger owners_deleted after delete on owners for each row execute function notify_session_change()`.execute(db);
  for (const table of ['sessions', 'owners']) {
    await sql`create trigger ${sql.raw(`${table}_truncated_sessions`)} after truncate on ${sql.raw(table)} for each statement execute function notify_session_change()`.execute(
      db,
    );
  }
}

export async function down(db: Kysely<any>) {
  for (const [trigger, table] of [
    ['sessions_changed', 'sessions'],
    ['sessions_deleted', 'sessions'],
    ['sessions_truncated_sessions', 'sessions'],
    ['owners_changed', 'owners'],
    ['owners_deleted', 'owners'],
    ['owners_truncated_sessions', 'owners'],
  ]) {
    await sql`drop trigger if exists ${sql.raw(trigger!)} on ${sql.raw(table!)}`.execute(db);
  }
  await sql`drop function if exists notify_session_change()`.execute(db);
}
