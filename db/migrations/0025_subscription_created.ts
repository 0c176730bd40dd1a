import { sql, type Kysely } from 'kysely';

/**
 * When the stored Stripe subscription was created (Stripe's `created`). An event about another subscription of the
 * same owner may replace a live stored one only when its own subscription is live and newer; without the stored
 * one's age a late event for an older subscription could not be told from one for a newer. Null for rows stored
 * before this column: such a row counts as older.
 */
export async function up(db: Kysely<any>) {
  await sql`alter table billing_accounts add column subscription_created_at timestamptz`.execute(db);
}

export async function down(db: Kysely<any>) {
  await sql`alter table billing_accounts drop column subscription_created_at`.execute(db);
}
