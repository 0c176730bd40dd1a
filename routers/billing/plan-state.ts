import type { BillingAccountRow } from './repository.ts';

type Plan = 'free' | 'premium' | 'enterprise';
type Status = 'active' | 'trialing' | 'past_due' | 'canceled' | 'unpaid' | 'incomplete' | 'incomplete_expired' | 'paused';

/** Stripe statuses under which the subscription's plan is given (past_due: Stripe is still retrying the payment). */
const LIVE_STATUSES = new Set(['active', 'trialing', 'past_due']);
const KNOWN_STATUSES = new Set<string>(['active', 'trialing', 'past_due', 'canceled', 'unpaid', 'incomplete', 'incomplete_expired', 'paused']);

export interface PlanState {
  plan: Plan;
  status: Status;
  source: 'stripe' | 'trial' | 'admin';
}

export const hasLiveSubscription = (account: BillingAccountRow | undefined) =>
  !!account?.stripe_subscription_id && LIVE_STATUSES.has(account.subscription_status ?? '');

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
