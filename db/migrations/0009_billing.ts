import { sql, type Kysely } from 'kysely';

/**
 * Billing state per owner. The effective plan stays in owners.plan (read on every request, so a change shows on
 * the next request of every instance); this table holds why: the Stripe customer and subscription as last read
 * from Stripe, and the one free trial an owner may take. billing_events records each Stripe event id in the same
 * transaction as its effect, so a redelivered event changes nothing twice.
 */
export async function up(db: Kysely<any>) {
  await db.schema
    .createTable('billing_accounts')
    .addColumn('owner_id', 'uuid', (c) => c.primaryKey().references('owners.id').onDelete('cascade'))
    .addColumn('stripe_customer_id', 'text', (c) => c.unique())
    .addColumn('stripe_subscription_id', 'text')
    .addColumn('subscription_plan', 'text')
    .addColumn('subscription_status', 'text')
    .addColumn('billing_interval', 'text')
    .addColumn('current_period_start', 'timestamptz')
    .addColumn('current_period_end', 'timestamptz')
    .addColumn('cancel_at_period_end', 'boolean', (c) => c.notNull().defaultTo(false))
    .addColumn('subscription_trial_end', 'timestamptz')
    .addColumn('trial_plan', 'text')
    .addColumn('trial_started_at', 'timestamptz')
    .addColumn('trial_end', 'timestamptz')
    .addColumn('trial_expired_at', 'timestamptz')
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(db.fn('now')))
    .execute();
  await sql`create index billing_accounts_open_trials_idx on billing_accounts (trial_end) where trial_expired_at is null`.execute(db);
  await db.schema
    .createTable('billing_events')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('type', 'text', (c) => c.notNull())
    .addColumn('owner_id', 'uuid', (c) => c.references('owners.id').onDelete('set null'))
    .addColumn('received_at', 'timestamptz', (c) => c.notNull().defaultTo(db.fn('now')))
    .execute();
}

export async function down(db: Kysely<any>) {
  await db.schema.dropTable('billing_events').ifExists().execute();
  await db.schema.dropTable('billing_accounts').ifExists().execute();
}
