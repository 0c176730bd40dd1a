import { sql, type Kysely } from 'kysely';

/**
 * A hand-off ticket's requester proves the address before replies are mailed to it: anyone may sign up, make a
 * ticket with a stranger's address through their own interface, and would otherwise mail that stranger any text
 * from the service's address. `confirm_token_hash` is the SHA-256 of the confirmation link's token (derived from
 * the ticket id with the service key, never stored). Tickets made before this had their replies mailed at once;
 * they count as confirmed, so nothing changes for them.
 */
export async function up(db: Kysely<any>) {
  await sql`alter table support_tickets add column requester_confirmed_at timestamptz`.execute(db);
  await sql`alter table support_tickets add column confirm_token_hash text`.execute(db);
  await sql`update support_tickets set requester_confirmed_at = created_at`.execute(db);
  await sql`create unique index support_tickets_confirm_token_idx on support_tickets (confirm_token_hash) where confirm_token_hash is not null`.execute(db);
}

export async function down(db: Kysely<any>) {
  await sql`drop index if exists support_tickets_confirm_token_idx`.execute(db);
  await sql`alter table support_tickets drop column confirm_token_hash`.execute(db);
  await sql`alter table support_tickets drop column requester_confirmed_at`.execute(db);
}
