import { sql, type Kysely } from 'kysely';

/**
 * The owner's newest Stripe Checkout Session. A new checkout expires the one recorded here, so an owner has one
 * payable Checkout page at a time and two tabs cannot both be paid. Null before the first checkout.
 */
export async function up(db: Kysely<any>) {
  await sql`alter table billing_accounts add column open_checkout_session_id text`.execute(db);
}

export async function down(db: Kysely<any>) {
  await sql`alter table billing_accounts drop column open_checkout_session_id`.execute(db);
}
