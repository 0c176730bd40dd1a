import { sql, type Kysely } from 'kysely';

/** The channel every instance listens on; the payload names the owner whose cached key list is dropped ('' for all). */
export const API_KEY_LIST_CHANGES_CHANNEL = 'api_key_list_changes';

/**
 * Any change to what an owner's key list shows notifies every instance, on commit, naming the owner: a key created,
 * deleted (cascades from a deleted interface or owner included) or changed in a column the list shows, last_used_at
 * too (written at most once a minute per key, so a busy key notifies about once a minute per instance). An update
 * that moves a key between owners names both. TRUNCATE names nobody (every list). PostgreSQL folds duplicates within
 * one transaction. The columns are named, not the whole row compared, so a column type without equality added later
 * cannot break updates.
 */
export async function up(db: Kysely<any>) {
  await sql`
    create function notify_api_key_list_change() returns trigger language plpgsql as $fn$
    begin
      if tg_op = 'TRUNCATE' then
        perform pg_notify(${sql.lit(API_KEY_LIST_CHANGES_CHANNEL)}, '');
        return null;
      end if;
      if tg_op in ('UPDATE', 'DELETE') then
        perform pg_notify(${sql.lit(API_KEY_LIST_CHANGES_CHANNEL)}, old.owner_id::text);
      end if;
      if tg_op = 'INSERT' or (tg_op = 'UPDATE' and new.owner_id is distinct from old.owner_id) then
        perform pg_notify(${sql.lit(API_KEY_LIST_CHANGES_CHANNEL)}, new.owner_id::text);
      end if;
      return null;
    end
    $fn$`.execute(db);
  await sql`create trigger api_keys_listed_inserted after insert on api_keys for each row execute function notify_api_key_list_change()`.execute(db);
  await sql`
    create trigger api_keys_listed_changed after update on api_keys for each row
    when ((old.owner_id, old.name, old.chat_interface_id, old.key_prefix, old.active, old.last_used_at, old.created_at, old.updated_at)
          is distinct from (new.owner_id, new.name, new.chat_interface_id, new.key_prefix, new.active, new.last_used_at, new.created_at, new.updated_at))
    execute function notify_api_key_list_change()`.execute(db);
  await sql`create trigger api_keys_listed_deleted after delete on api_keys for each row execute function notify_api_key_list_change()`.execute(db);
  await sql`create trigger api_keys_listed_truncated after truncate on api_keys for each statement execute function notify_api_key_list_change()`.execute(db);
}

export async function down(db: Kysely<any>) {
  for (const trigger of ['api_keys_listed_inserted', 'api_keys_listed_changed', 'api_keys_listed_deleted', 'api_keys_listed_truncated']) {
    await sql`drop trigger if exists ${sql.raw(trigger)} on api_keys`.execute(db);
  }
  await sql`drop function if exists notify_api_key_list_change()`.execute(db);
}
