import { isStripeError, type Stripe } from '../../adapters/outbound/billing/stripe-client.ts';
import { AppError } from '../../schema/errors.ts';
import type { Context } from '../context.ts';
import { hasPendingOrLiveSubscription } from './plan-state.ts';
import * as repo from './repository.ts';
import { callStripe } from './stripe-calls.ts';
import { isResourceMissing } from './stripe-errors.ts';

type Closing = { outcome: 'closed' } | { outcome: 'paid'; subscriptionId: string | null };

/**
 * Expires a Checkout Session so it can no longer be paid. Stripe refuses to expire one that is not open; then its
 * state says whether it was paid. One this Stripe account does not know (the key was changed) cannot be paid here.
 */
async function expireCheckout(ctx: Context, stripe: Stripe, sessionId: string): Promise<Closing> {
  return callStripe(ctx, async () => {
    try {
      await stripe.checkout.sessions.expire(sessionId);
      return { outcome: 'closed' };
    } catch (error) {
      if (isResourceMissing(error)) return { outcome: 'closed' };
      if (!isStripeError(error) || error.type !== 'StripeInvalidRequestError') throw error;
      const session = await stripe.checkout.sessions.retrieve(sessionId);
      if (session.status !== 'complete') return { outcome: 'closed' };
      const subscription = session.subscription;
      return { outcome: 'paid', subscriptionId: typeof subscription === 'string' ? subscription : (subscription?.id ?? null) };
    }
  });
}

/**
 * One payable Checkout page per owner: two open ones (two tabs, or two requests at once) could both be paid and
 * bill the owner for two subscriptions. So the owner's newest session is recorded and the one it replaces expired;
 * of two checkouts at once, the later one's page is the one that stays payable.
 *
 * The replaced page may have been paid already, its webhook not here yet: then the owner has just subscribed, the
 * new page is expired instead and the answer is 409. A paid page whose subscription is the one on record and has
 * ended is an old purchase, not a new one.
 */
export async function supersedeOpenCheckout(ctx: Context, stripe: Stripe, ownerId: string, sessionId: string): Promise<void> {
  const db = ctx.deps.database.db;
  const previous = await repo.replaceOpenCheckout(db, ownerId, sessionId);
  if (!previous || previous === sessionId) return;
  let closing: Closing;
  try {
    closing = await expireCheckout(ctx, stripe, previous);
  } catch (error) {
    // The new page is never shown (this request fails), so the old one stays on record for the next checkout to expire.
    await repo.restoreOpenCheckout(db, ownerId, previous, sessionId);
    throw error;
  }
  if (closing.outcome === 'closed') return;
  const account = await repo.findAccount(db, ownerId);
  const oldPurchase = !!closing.subscriptionId && account?.stripe_subscription_id === closing.subscriptionId && !hasPendingOrLiveSubscription(account);
  if (oldPurchase) return;
  await expireCheckout(ctx, stripe, sessionId);
  throw new AppError('CONFLICT', 'Already subscribed', 'The Checkout page opened before this one has been paid; its subscription is on its way');
}
