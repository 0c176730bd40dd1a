import { sql, type Kysely } from 'kysely';

/**
 * A chat interface with upcoming confirmed bookings cannot be deleted while they are live: its bookings would go by
 * cascade, and their attendees would keep calendar entries for meetings that no longer exist. The API's delete
 * cancels them first in the same transaction (mails and `booking.cancelled`), so this stops only the other ways in:
 * deleting an owner (its interfaces cascade) or an interface in SQL. See README, Bookings.
 */
export async function up(db: Kysely<any>) {
  await sql`
    create function chat_interfaces_keep_booked() returns trigger language plpgsql as $$
    begin
      if exists (select 1 from bookings where chat_interface_id = old.id and status = 'confirmed' and end_at > now()) then
        raise exception 'chat interface % has upcoming bookings: delete it with DELETE /api/v1/chat-interfaces/{id}, which cancels them with their mails', old.id
          using errcode = 'restrict_violation';
      end if;
      return old;
    end $$`.execute(db);
  await sql`create trigger chat_interfaces_keep_booked before delete on chat_interfaces
    for each row execute function chat_interfaces_keep_booked()`.execute(db);
}

export async function down(db: Kysely<any>) {
  await sql`drop trigger if exists chat_interfaces_keep_booked on chat_interfaces`.execute(db);
  await sql`drop function if exists chat_interfaces_keep_booked()`.execute(db);
}
