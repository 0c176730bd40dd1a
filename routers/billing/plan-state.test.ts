import { describe, expect, it } from 'vitest';
import { planAfterTrial, planState, trialAvailable } from './plan-state.ts';
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
