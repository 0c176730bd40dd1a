import type { BillingAccountRow } from './repository.ts';

type Plan = 'free' | 'premium' | 'enterprise';
type Status = (typeof SUBSCRIPTION_STATUSES)[number];

/** Stripe statuses under which the subscription's plan is given (past_due: Stripe is still retrying the payment). */
const LIVE_STATUSES = new Set(['active', 'trialing', 'past_due']);
/** Every status a subscription has in the Stripe API version the SDK is pinned to. */
export const SUBSCRIPTION_STATUSES = ['active', 'trialing', 'past_due', 'canceled', 'unpaid', 'incomplete', 'incomplete_expired', 'paused'] as const;
const KNOWN_STATUSES = new Set<string>(SUBSCRIPTION_STATUSES);

export interface PlanState {
  plan: Plan;
  status: Status;
  source: 'stripe' | 'trial' | 'admin';
}

const hasLiveSubscription = (account: BillingAccountRow | undefined) =>
  !!account?.stripe_subscription_id && LIVE_STATUSES.has(account.subscription_status ?? '');

/**
 * A live subscription, or one whose first payment is still pending (`incomplete`, for up to 23 hours): either way a
 * second checkout would bill the owner twice.
 */
export const hasPendingOrLiveSubscription = (account: BillingAccountRow | undefined) =>
  hasLiveSubscription(account) || (!!account?.stripe_subscription_id && account.subscription_status === 'incomplete');

/** Live outranks pending (incomplete), which outranks ended (canceled, unpaid, incomplete_expired, paused). */
const standing = (status: string | null) => (LIVE_STATUSES.has(status ?? '') ? 2 : status === 'incomplete' ? 1 : 0);

/**
 * Whether Stripe's state of `incoming` may replace the stored subscription. Its own subscription always may; another
 * one only when it stands higher (live over pending over ended), or as high and was created later: a late or
 * retried event for an older subscription must not downgrade a paying owner or reopen checkout. A stored row of
 * unknown age (stored before the age was kept) counts as older.
 */
export function replacesStoredSubscription(
  stored: BillingAccountRow,
  incoming: { stripeSubscriptionId: string; status: string; createdAt: Date | null },
): boolean {
  if (!stored.stripe_subscription_id || stored.stripe_subscription_id === incoming.stripeSubscriptionId) return true;
  const [was, is] = [standing(stored.subscription_status), standing(incoming.status)];
  if (is !== was) return is > was;
  return !stored.subscription_created_at || (!!incoming.createdAt && incoming.createdAt.getTime() > stored.subscription_created_at.getTime());
}

const trialRunning = (account: BillingAccountRow | undefined, now: Date) =>
  !!account?.trial_end && account.trial_expired_at === null && account.trial_end.getTime() > now.getTime();

/**
 * What an owner's plan is and why, in this order: a live Stripe subscription; a running trial; a Stripe subscription
 * that has ended (free); otherwise the plan an admin set (`adminPlan`, the owner's stored plan).
 */
export function planState(account: BillingAccountRow | undefined, adminPlan: Plan, now: Date): PlanState {
  const status = (KNOWN_STATUSES.has(account?.subscription_status ?? '') ? account?.subscription_status : 'incomplete') as Status;
  if (account && hasLiveSubscription(account)) return { plan: account.subscription_plan ?? 'premium', status, source: 'stripe' };
  if (account && trialRunning(account, now)) return { plan: account.trial_plan ?? 'premium', status: 'trialing', source: 'trial' };
  if (account?.stripe_subscription_id) return { plan: 'free', status, source: 'stripe' };
  return { plan: adminPlan, status: 'active', source: 'admin' };
}

/** The one free trial: only for an owner on the free plan who never had one and pays for nothing. */
export const trialAvailable = (account: BillingAccountRow | undefined, currentPlan: Plan) =>
  currentPlan === 'free' && !account?.trial_started_at && !hasLiveSubscription(account);

/** The plan an owner falls back to when a trial ends: the paid plan when a live subscription exists, else free. */
export const planAfterTrial = (account: BillingAccountRow): Plan => (hasLiveSubscription(account) ? (account.subscription_plan ?? 'premium') : 'free');
