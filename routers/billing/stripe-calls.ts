import type { Stripe } from '../../adapters/outbound/billing/stripe-client.ts';
import type { Context } from '../context.ts';
import { billingNotConfigured, stripeFailure } from './stripe-errors.ts';

export function requireStripe(ctx: Context): Stripe {
  if (!ctx.deps.stripe) throw billingNotConfigured();
  return ctx.deps.stripe;
}

/** Runs a Stripe call; its failures become our error codes (never Stripe's own message). */
export async function callStripe<T>(ctx: Context, work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    const appError = stripeFailure(error);
    if (!appError) throw error;
    if (appError.code !== 'NOT_FOUND') ctx.deps.logger.warn('payment provider call failed', { reason: String(error), requestId: ctx.requestId });
    throw appError;
  }
}
