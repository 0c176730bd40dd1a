import { describe, expect, it } from 'vitest';
import { hasPendingOrLiveSubscription, planAfterTrial, planState, replacesStoredSubscription, trialAvailable } from './plan-state.ts';
import type { BillingAccountRow } from './repository.ts';

const now = new Date('2026-11-25T12:00:00Z');
const account = (changes: Partial<BillingAccountRow>): BillingAccountRow => ({
  owner_id: 'o1',
  stripe_customer_id: null,
  stripe_subscription_id: null,
  subscription_plan: null,
  subscription_status: null,
  billing_interval: null,
  current_period_start: null,
  current_period_end: null,
  cancel_at_period_end: false,
  subscription_trial_end: null,
  subscription_created_at: null,
  open_checkout_session_id: null,
  trial_plan: null,
  trial_started_at: null,
  trial_end: null,
  trial_expired_at: null,
  updated_at: now,
  ...changes,
});
const paid = (status: string) => account({ stripe_subscription_id: 'sub_1', subscription_plan: 'enterprise', subscription_status: status });
const trial = (end: string, expired = false) =>
  account({ trial_plan: 'premium', trial_started_at: new Date('2026-11-01'), trial_end: new Date(end), trial_expired_at: expired ? new Date(end) : null });

describe('planState', () => {
  it('without billing state the admin-set plan stands', () => {
    expect(planState(undefined, 'premium', now)).toEqual({ plan: 'premium', status: 'active', source: 'admin' });
  });
  it('a live subscription (active, trialing, past_due) gives its plan', () => {
    for (const status of ['active', 'trialing', 'past_due'])
      expect(planState(paid(status), 'free', now)).toEqual({ plan: 'enterprise', status, source: 'stripe' });
  });
  it('an ended subscription is free, with its status', () => {
    for (const status of ['canceled', 'unpaid', 'incomplete_expired'])
      expect(planState(paid(status), 'enterprise', now)).toEqual({ plan: 'free', status, source: 'stripe' });
  });
  it('a running trial gives its plan until its end; then the stored plan', () => {
    expect(planState(trial('2026-12-01'), 'premium', now)).toEqual({ plan: 'premium', status: 'trialing', source: 'trial' });
    expect(planState(trial('2026-11-20'), 'free', now).source).toBe('admin');
    expect(planState(trial('2026-12-01', true), 'free', now).source).toBe('admin');
  });
  it('a live subscription outranks a running trial', () => {
    expect(planState({ ...trial('2026-12-01'), ...paid('active'), trial_plan: 'premium' }, 'premium', now).source).toBe('stripe');
  });
});

describe('trials', () => {
  it('are available once, to free owners who pay for nothing', () => {
    expect(trialAvailable(undefined, 'free')).toBe(true);
    expect(trialAvailable(undefined, 'premium')).toBe(false);
    expect(trialAvailable(trial('2026-12-01'), 'free')).toBe(false);
    expect(trialAvailable(paid('active'), 'free')).toBe(false);
    expect(trialAvailable(paid('canceled'), 'free')).toBe(true);
  });
  it('end on the paid plan when a live subscription exists, else free', () => {
    expect(planAfterTrial(paid('active'))).toBe('enterprise');
    expect(planAfterTrial(paid('canceled'))).toBe('free');
    expect(planAfterTrial(trial('2026-11-20'))).toBe('free');
  });
});

describe('which subscription is stored', () => {
  const stored = (status: string, created: string | null = '2026-11-01') =>
    account({ ...paid(status), subscription_created_at: created ? new Date(created) : null });
  const other = (status: string, created = '2026-10-01') => ({ stripeSubscriptionId: 'sub_2', status, createdAt: new Date(created) });

  it('the stored subscription’s own state always replaces it, and anything replaces no subscription', () => {
    expect(replacesStoredSubscription(stored('active'), { stripeSubscriptionId: 'sub_1', status: 'canceled', createdAt: null })).toBe(true);
    expect(replacesStoredSubscription(account({}), other('incomplete_expired'))).toBe(true);
  });
  it('another subscription does not replace a live or pending one unless it stands higher, or as high and newer', () => {
    for (const status of ['canceled', 'incomplete_expired', 'unpaid', 'incomplete'])
      expect(replacesStoredSubscription(stored('active'), other(status, '2026-11-20'))).toBe(false);
    expect(replacesStoredSubscription(stored('active'), other('active', '2026-10-01'))).toBe(false);
    expect(replacesStoredSubscription(stored('active'), other('active', '2026-11-20'))).toBe(true);
    expect(replacesStoredSubscription(stored('incomplete'), other('canceled', '2026-11-20'))).toBe(false);
    expect(replacesStoredSubscription(stored('incomplete'), other('active', '2026-10-01'))).toBe(true);
  });
  it('an ended one is replaced by a newer or a live one, not by an older ended one; a row of unknown age counts as older', () => {
    expect(replacesStoredSubscription(stored('canceled'), other('active', '2026-10-01'))).toBe(true);
    expect(replacesStoredSubscription(stored('canceled'), other('canceled', '2026-10-01'))).toBe(false);
    expect(replacesStoredSubscription(stored('canceled'), other('canceled', '2026-11-20'))).toBe(true);
    expect(replacesStoredSubscription(stored('active', null), other('active', '2026-10-01'))).toBe(true);
  });
  it('checkout waits while a subscription is live or its first payment is pending', () => {
    for (const status of ['active', 'trialing', 'past_due', 'incomplete']) expect(hasPendingOrLiveSubscription(paid(status)), status).toBe(true);
    for (const status of ['canceled', 'unpaid', 'incomplete_expired', 'paused']) expect(hasPendingOrLiveSubscription(paid(status)), status).toBe(false);
  });
});
