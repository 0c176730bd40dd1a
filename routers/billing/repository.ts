import { type Kysely, type Selectable, sql, type Transaction } from 'kysely';
import type { BillingAccountsTable, DB } from '../../db/types.ts';
import type { Activity } from '../dashboard/activity.ts';
import { activityJson, NO_INTERFACE } from '../dashboard/repository.ts';

/** The first day (UTC) of the calendar month `at` falls in, as the usage table keys it. */
export const monthStart = (at: Date) => new Date(Date.UTC(at.getUTCFullYear(), at.getUTCMonth(), 1));

const day = (date: Date) => date.toISOString().slice(0, 10);

/** An owner's counts for the period starting at `periodStart` (zeros before the first use). */
export async function usageOf(db: Kysely<DB>, ownerId: string, periodStart: Date) {
  const row = await db
    .selectFrom('usage_periods')
    .select([
      sql<number>`messages::float8`.as('messages'),
      sql<number>`queries::float8`.as('queries'),
      sql<number>`tokens_in::float8`.as('tokensIn'),
      sql<number>`tokens_out::float8`.as('tokensOut'),
    ])
    .where('owner_id', '=', ownerId)
    .where(sql<boolean>`period_start = ${day(periodStart)}::date`)
    .executeTakeFirst();
  return row ?? { messages: 0, queries: 0, tokensIn: 0, tokensOut: 0 };
}

/**
 * Counts one answered knowledge-base query and its tokens (the chat turn counts itself in its own statement), and
 * its activity in the owner's dashboard rollups: one statement, since it runs on every query's path.
 */
export async function recordQueryUsage(
  db: Kysely<DB>,
  ownerId: string,
  usage: { promptTokens: number; completionTokens: number },
  activity: Activity,
  at = new Date(),
) {
  await sql`
    with metered as (
      insert into usage_periods (owner_id, period_start, queries, tokens_in, tokens_out)
      values (${ownerId}::uuid, ${day(monthStart(at))}::date, 1, ${usage.promptTokens}, ${usage.completionTokens})
      on conflict (owner_id, period_start) do update
        set queries = usage_periods.queries + 1,
            tokens_in = usage_periods.tokens_in + excluded.tokens_in,
            tokens_out = usage_periods.tokens_out + excluded.tokens_out
      returning owner_id)
    select count_activity(owner_id, ${NO_INTERFACE}::uuid, ${activityJson(activity)}) from metered`.execute(db);
}

export type BillingAccountRow = Selectable<BillingAccountsTable>;

export const findAccount = (db: Kysely<DB>, ownerId: string) =>
  db.selectFrom('billing_accounts').selectAll().where('owner_id', '=', ownerId).executeTakeFirst();

/** Locks the owner's billing row for the rest of the transaction (creating it first), so changes to one owner serialise. */
export async function lockAccount(trx: Transaction<DB>, ownerId: string): Promise<BillingAccountRow> {
  await trx
    .insertInto('billing_accounts')
    .values({ owner_id: ownerId })
    .onConflict((oc) => oc.column('owner_id').doNothing())
    .execute();
  return trx.selectFrom('billing_accounts').selectAll().where('owner_id', '=', ownerId).forUpdate().executeTakeFirstOrThrow();
}

export const findOwnerIdByCustomer = async (db: Kysely<DB>, customerId: string) =>
  (await db.selectFrom('billing_accounts').select('owner_id').where('stripe_customer_id', '=', customerId).executeTakeFirst())?.owner_id;

/** Keeps the first customer id stored for an owner: two racing checkouts end with one customer. */
export async function saveCustomerId(db: Kysely<DB>, ownerId: string, customerId: string): Promise<string> {
  const row = await db
    .insertInto('billing_accounts')
    .values({ owner_id: ownerId, stripe_customer_id: customerId })
    .onConflict((oc) =>
      oc.column('owner_id').doUpdateSet({ stripe_customer_id: sql`coalesce(billing_accounts.stripe_customer_id, excluded.stripe_customer_id)` }),
    )
    .returning('stripe_customer_id')
    .executeTakeFirstOrThrow();
  return row.stripe_customer_id ?? customerId;
}

/**
 * Records `sessionId` as the owner's open Checkout Session and answers the one it replaces. The row lock orders two
 * checkouts at once, so each replaced session is answered to exactly one of them.
 */
export function replaceOpenCheckout(db: Kysely<DB>, ownerId: string, sessionId: string): Promise<string | null> {
  return db.transaction().execute(async (trx) => {
    const account = await lockAccount(trx, ownerId);
    await trx.updateTable('billing_accounts').set({ open_checkout_session_id: sessionId }).where('owner_id', '=', ownerId).execute();
    return account.open_checkout_session_id;
  });
}

/** Puts `previous` back as the open session, unless a later checkout has recorded its own meanwhile. */
export async function restoreOpenCheckout(db: Kysely<DB>, ownerId: string, previous: string, replacedBy: string) {
  await db
    .updateTable('billing_accounts')
    .set({ open_checkout_session_id: previous })
    .where('owner_id', '=', ownerId)
    .where('open_checkout_session_id', '=', replacedBy)
    .execute();
}

export interface SubscriptionState {
  stripeSubscriptionId: string;
  plan: 'premium' | 'enterprise';
  status: string;
  interval: 'month' | 'year' | null;
  currentPeriodStart: Date | null;
  currentPeriodEnd: Date | null;
  cancelAtPeriodEnd: boolean;
  trialEnd: Date | null;
  /** Stripe's `created`: which of two subscriptions of one owner is the newer. */
  createdAt: Date | null;
}

export function saveSubscription(trx: Transaction<DB>, ownerId: string, state: SubscriptionState, customerId: string) {
  return trx
    .updateTable('billing_accounts')
    .set({
      stripe_customer_id: customerId,
      stripe_subscription_id: state.stripeSubscriptionId,
      subscription_plan: state.plan,
      subscription_status: state.status,
      billing_interval: state.interval,
      current_period_start: state.currentPeriodStart,
      current_period_end: state.currentPeriodEnd,
      cancel_at_period_end: state.cancelAtPeriodEnd,
      subscription_trial_end: state.trialEnd,
      subscription_created_at: state.createdAt,
      updated_at: new Date(),
    })
    .where('owner_id', '=', ownerId)
    .returningAll()
    .executeTakeFirstOrThrow();
}

export function saveTrial(trx: Transaction<DB>, ownerId: string, plan: 'premium' | 'enterprise', startedAt: Date, end: Date) {
  return trx
    .updateTable('billing_accounts')
    .set({ trial_plan: plan, trial_started_at: startedAt, trial_end: end, trial_expired_at: null, updated_at: startedAt })
    .where('owner_id', '=', ownerId)
    .returningAll()
    .executeTakeFirstOrThrow();
}

/** Ends the owner's trial now if one is running (an admin set the plan); the sweep then leaves that plan alone. */
export async function endRunningTrial(db: Kysely<DB>, ownerId: string, now: Date) {
  await db
    .updateTable('billing_accounts')
    .set({ trial_expired_at: now, updated_at: now })
    .where('owner_id', '=', ownerId)
    .where('trial_expired_at', 'is', null)
    .where('trial_end', '>', now)
    .execute();
}

/**
 * Marks every trial that has run out as expired and returns those rows. One UPDATE: of two sweeps running at once,
 * the second waits for the first's row locks, re-checks `trial_expired_at is null`, and skips what it expired.
 */
export function expireTrials(trx: Transaction<DB>, now: Date) {
  return trx
    .updateTable('billing_accounts')
    .set({ trial_expired_at: now, updated_at: now })
    .where('trial_expired_at', 'is', null)
    .where('trial_end', '<=', now)
    .returningAll()
    .execute();
}

/** Records a provider event id; false when it was already recorded (a redelivery). */
export async function recordBillingEvent(trx: Transaction<DB>, id: string, type: string, ownerId: string | null): Promise<boolean> {
  const row = await trx
    .insertInto('billing_events')
    .values({ id, type, owner_id: ownerId })
    .onConflict((oc) => oc.column('id').doNothing())
    .returning('id')
    .executeTakeFirst();
  return row !== undefined;
}

export const billingEventSeen = async (db: Kysely<DB>, id: string) =>
  (await db.selectFrom('billing_events').select('id').where('id', '=', id).executeTakeFirst()) !== undefined;

export const accountsOf = (db: Kysely<DB>, ownerIds: string[]) =>
  ownerIds.length === 0 ? Promise.resolve([]) : db.selectFrom('billing_accounts').selectAll().where('owner_id', 'in', ownerIds).execute();

/** This month's message and token counts of several owners. */
export const usageOfOwners = (db: Kysely<DB>, ownerIds: string[], periodStart: Date) =>
  ownerIds.length === 0
    ? Promise.resolve([])
    : db
        .selectFrom('usage_periods')
        .select(['owner_id', sql<number>`messages::float8`.as('messages'), sql<number>`(tokens_in + tokens_out)::float8`.as('tokens')])
        .where('owner_id', 'in', ownerIds)
        .where(sql<boolean>`period_start = ${day(periodStart)}::date`)
        .execute();
