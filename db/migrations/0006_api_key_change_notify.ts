import { sql, type Kysely } from 'kysely';

/** The channel every instance listens on; its API-key cache is emptied on each notification. */
export const API_KEY_CHANGES_CHANNEL = 'api_key_changes';

/**
 * Changes that can make a cached API-key lookup wrong (a key deactivated or deleted, its interface's slug,
 * knowledge base or endpoint changed, the interface deleted, cascades and TRUNCATE included) notify every
 * instance, on commit. Updates of other columns (last_used_at, names, avatars) do not, so they never empty the caches.
 * Duplicate notifications within one transaction are folded by PostgreSQL.
 */
export async function up(db: Kysely<any>) {
  await sql`
    create function notify_api_key_change() returns trigger language plpgsql as $fn$
    begin
      perform pg_notify(${sql.lit(API_KEY_CHANGES_CHANNEL)}, '');
      return null;
    end
    $fn$`.execute(db);
  await sql`
    create trigger api_keys_changed after update on api_keys for each row
    when (old.active is distinct from new.active or old.key_hash is distinct from new.key_hash
          or old.owner_id is distinct from new.owner_id or old.chat_interface_id is distinct from new.chat_interface_id)
    execute function notify_api_key_change()`.execute(db);
  await sql`create trigger api_keys_deleted after delete on api_keys for each row execute function notify_api_key_change()`.execute(db);
  await sql`
    create trigger chat_interfaces_changed after update on chat_interfaces for each row
    when (old.slug is distinct from new.slug or old.owner_id is distinct from new.owner_id or old.config_id is distinct from new.config_id
          or old.endpoint_url is distinct from new.endpoint_url or old.endpoint_type is distinct from new.endpoint_type
          or old.endpoint_api_key_enc is distinct from new.endpoint_api_key_enc)
    execute function notify_api_key_change()`.execute(db);
  await sql`create trigger chat_interfaces_deleted after delete on chat_interfaces for each row execute function notify_api_key_change()`.execute(db);
  for (const table of ['api_keys', 'chat_interfaces']) {
    await sql`create trigger ${sql.raw(`${table}_truncated`)} after truncate on ${sql.raw(table)} for each statement execute function notify_api_key_change()`.execute(
      db,
    );
  }
}

export async function down(db: Kysely<any>) {
  for (const [trigger, table] of [
    ['api_keys_changed', 'api_keys'],
    ['api_keys_deleted', 'api_keys'],
    ['api_keys_truncated', 'api_keys'],
    ['chat_interfaces_changed', 'chat_interfaces'],
    ['chat_interfaces_deleted', 'chat_interfaces'],
    ['chat_interfaces_truncated', 'chat_interfaces'],
  ]) {
    await sql`drop trigger if exists ${sql.raw(trigger!)} on ${sql.raw(table!)}`.execute(db);
  }
  await sql`drop function if exists notify_api_key_change()`.execute(db);
}
