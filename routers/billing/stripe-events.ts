import type { SessionCache } from '../auth/session-cache.ts';
import type { Kysely } from 'kysely';
import type { Stripe } from '../../adapters/outbound/billing/stripe-client.ts';
import type { Logger } from '../../adapters/outbound/logger.ts';
import type { Config } from '../../schema/config.ts';
import type { DB } from '../../db/types.ts';
import { isUuid, toIso } from '../../schema/common.ts';
import { findOwnerById, updateOwnerPlanAndRole } from '../auth/repository.ts';
import { webhookEvent, withEvents } from '../webhooks/outbox.ts';
import type { OutboxEvent } from '../webhooks/outbox-repository.ts';
import * as repo from './repository.ts';
import { planState, replacesStoredSubscription } from './plan-state.ts';
import { checkRetrievedSubscription, isHandledEventType } from './stripe-event-shape.ts';
import { isResourceMissing, stripeFailure } from './stripe-errors.ts';

export interface StripeEventDeps {
  database: { db: Kysely<DB> };
  webhookJobs: { notify(): void };
  config: Pick<Config, 'STRIPE_PRICES'>;
  logger: Logger;
  stripe: Stripe;
  sessionCache: Pick<SessionCache, 'forgetOwner'>;
  /** The webhook request's, for the log line of a failed Stripe call. */
  requestId?: string;
}

export type EventOutcome = 'applied' | 'duplicate' | 'ignored';

const idOf = (value: string | { id: string } | null | undefined) => (typeof value === 'string' ? value : (value?.id ?? null));
const fromUnix = (seconds: number | null | undefined) => (typeof seconds === 'number' ? new Date(seconds * 1000) : null);

/** The plan a subscription pays for: its price id, looked up in STRIPE_PRICES; the plan our checkout put in its metadata otherwise. */
export function subscriptionStateFrom(sub: Stripe.Subscription, prices: Config['STRIPE_PRICES']): repo.SubscriptionState | undefined {
  const item = sub.items?.data?.[0];
  const priceId = item?.price?.id;
  const byPrice = Object.entries(prices)
    .find(([, id]) => id === priceId)?.[0]
    ?.split(':')[0];
  const plan = byPrice ?? sub.metadata?.plan;
  if (plan !== 'premium' && plan !== 'enterprise') return undefined;
  const interval = item?.price?.recurring?.interval;
  return {
    stripeSubscriptionId: sub.id,
    plan,
    status: sub.status,
    interval: interval === 'month' ? 'month' : interval === 'year' ? 'year' : null,
    currentPeriodStart: fromUnix(item?.current_period_start),
    currentPeriodEnd: fromUnix(item?.current_period_end),
    cancelAtPeriodEnd: sub.cancel_at_period_end,
    trialEnd: fromUnix(sub.trial_end),
    createdAt: fromUnix(sub.created),
  };
}

/** Which subscription and customer an event is about, and the owner our checkout named (client_reference_id). */
function subjectOf(event: Stripe.Event): { subscriptionId: string | null; customerId: string | null; ownerHint: string | null } {
  const object = event.data.object as unknown as Record<string, unknown>;
  switch (event.type) {
    case 'checkout.session.completed': {
      const session = event.data.object;
      // Our checkout puts the owner's id there; a Payment Link or another integration on the account may put anything.
      const hint = session.client_reference_id;
      return { subscriptionId: idOf(session.subscription), customerId: idOf(session.customer), ownerHint: hint && isUuid(hint) ? hint : null };
    }
    case 'invoice.paid':
    case 'invoice.payment_failed': {
      const invoice = event.data.object;
      return { subscriptionId: idOf(invoice.parent?.subscription_details?.subscription), customerId: idOf(invoice.customer), ownerHint: null };
    }
    default:
      return { subscriptionId: idOf(object.id as string), customerId: idOf(object.customer as string), ownerHint: null };
  }
}

/** Events of one owner are applied one at a time in this process (the row lock orders them across instances). */
const ownerQueues = new Map<string, Promise<unknown>>();
function oneAtATime<T>(key: string, work: () => Promise<T>): Promise<T> {
  const previous = ownerQueues.get(key) ?? Promise.resolve();
  const next = previous.then(work, work);
  const settled = next.then(
    () => undefined,
    () => undefined,
  );
  ownerQueues.set(key, settled);
  settled.then(() => {
    if (ownerQueues.get(key) === settled) ownerQueues.delete(key);
  });
  return next;
}

/**
 * Applies one verified, well-formed (parseStripeEvent) Stripe event, exactly once: the event id is recorded in the
 * transaction of its effect. The event's own copy of the subscription is never trusted for state: the subscription
 * is re-read from Stripe, so events that arrive late or out of order still end in Stripe's current state. Only a
 * failure of that call is the provider's (UPSTREAM_*); anything else thrown here is ours.
 */
export async function applyStripeEvent(deps: StripeEventDeps, event: Stripe.Event): Promise<EventOutcome> {
  if (!isHandledEventType(event.type)) return 'ignored';
  const db = deps.database.db;
  if (await repo.billingEventSeen(db, event.id)) return 'duplicate';
  const subject = subjectOf(event);
  let ownerId = subject.customerId ? await repo.findOwnerIdByCustomer(db, subject.customerId) : undefined;
  if (!ownerId && subject.ownerHint && subject.customerId && (await findOwnerById(db, subject.ownerHint))) {
    ownerId = subject.ownerHint;
    await repo.saveCustomerId(db, ownerId, subject.customerId);
  }
  if (!ownerId || !subject.subscriptionId || !subject.customerId) {
    deps.logger.warn('billing event for no known owner or subscription', { eventId: event.id, type: event.type });
    return 'ignored';
  }
  const owner = ownerId;
  const customerId = subject.customerId;
  const subscriptionId = subject.subscriptionId;
  return oneAtATime(owner, async () => {
    let current: Stripe.Subscription | undefined;
    try {
      current = checkRetrievedSubscription(await deps.stripe.subscriptions.retrieve(subscriptionId), subscriptionId);
    } catch (error) {
      if (!isResourceMissing(error)) {
        const failure = stripeFailure(error);
        if (!failure) throw error;
        deps.logger.warn('payment provider call failed', { reason: String(error), eventId: event.id, requestId: deps.requestId });
        throw failure;
      }
    }
    if (current && idOf(current.customer) !== customerId) {
      // Stripe names the customer who pays; an event that pairs this customer with another's subscription changes neither.
      deps.logger.warn('billing event pairs a customer with another customer’s subscription', { eventId: event.id, subscriptionId });
      return 'ignored';
    }
    const state = current ? subscriptionStateFrom(current, deps.config.STRIPE_PRICES) : undefined;
    if (!state) {
      deps.logger.warn('billing event for a subscription with no known plan', { eventId: event.id, subscriptionId });
      return 'ignored';
    }
    let outcome: EventOutcome = 'applied';
    await withEvents(
      deps,
      async (trx) => {
        if (!(await repo.recordBillingEvent(trx, event.id, event.type, owner))) {
          outcome = 'duplicate';
          return [];
        }
        const before = await repo.lockAccount(trx, owner);
        const ownerRow = await findOwnerById(trx, owner);
        if (!ownerRow) return [];
        if (!replacesStoredSubscription(before, state)) {
          // Recorded (a redelivery stays a duplicate), but about a subscription the stored one supersedes: nothing
          // changes, and no subscription.* event tells the owner's systems otherwise.
          deps.logger.info('billing event for a superseded subscription', { eventId: event.id, subscriptionId, current: before.stripe_subscription_id });
          outcome = 'ignored';
          return [];
        }
        const after = await repo.saveSubscription(trx, owner, state, customerId);
        const now = new Date();
        const effective = planState(after, ownerRow.plan, now);
        if (effective.plan !== ownerRow.plan) await updateOwnerPlanAndRole(trx, owner, { plan: effective.plan });
        return eventsFor(event, owner, before, after, effective);
      },
      (events) => events,
    );
    // The plan rides in the cached session: this instance drops it now, the others on the change notification.
    deps.sessionCache.forgetOwner(owner);
    return outcome;
  });
}

function eventsFor(
  event: Stripe.Event,
  ownerId: string,
  before: repo.BillingAccountRow,
  after: repo.BillingAccountRow,
  effective: ReturnType<typeof planState>,
): OutboxEvent[] {
  const data = {
    ownerId,
    plan: effective.plan,
    status: effective.status,
    stripeSubscriptionId: after.stripe_subscription_id,
    currentPeriodEnd: toIso(after.current_period_end),
    cancelAtPeriodEnd: after.cancel_at_period_end,
    trialEnd: toIso(after.subscription_trial_end),
  };
  const events: OutboxEvent[] = [];
  const changed =
    before.subscription_status !== after.subscription_status ||
    before.subscription_plan !== after.subscription_plan ||
    before.cancel_at_period_end !== after.cancel_at_period_end ||
    before.current_period_end?.getTime() !== after.current_period_end?.getTime();
  if (before.stripe_subscription_id !== after.stripe_subscription_id) events.push(webhookEvent(ownerId, 'subscription.created', data));
  else if (after.subscription_status === 'canceled' && before.subscription_status !== 'canceled')
    events.push(webhookEvent(ownerId, 'subscription.canceled', data));
  else if (changed) events.push(webhookEvent(ownerId, 'subscription.updated', data));
  if (event.type === 'customer.subscription.trial_will_end') events.push(webhookEvent(ownerId, 'subscription.trial_ending', data));
  if (event.type === 'invoice.payment_failed') {
    const invoice = event.data.object;
    events.push(
      webhookEvent(ownerId, 'invoice.payment_failed', {
        ownerId,
        invoiceId: invoice.id ?? '',
        stripeSubscriptionId: after.stripe_subscription_id,
        amountDue: invoice.amount_due,
        currency: invoice.currency,
        attemptCount: invoice.attempt_count,
        nextPaymentAttempt: toIso(fromUnix(invoice.next_payment_attempt)),
      }),
    );
  }
  return events;
}
