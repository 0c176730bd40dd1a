import { isStripeError } from '../../adapters/outbound/billing/stripe-client.ts';
import { OutboundError } from '../../adapters/outbound/http/outbound-error.ts';
import { AppError } from '../../schema/errors.ts';

/** Stripe answered 404 resource_missing: the object does not exist (or no longer does). */
export const isResourceMissing = (error: unknown) => isStripeError(error) && (error.code === 'resource_missing' || error.statusCode === 404);

/**
 * A failed Stripe call as the client sees it. Stripe's own message is not passed on (it can name our account's
 * objects and settings); the request id is logged by the caller's error report instead. Undefined for anything
 * that is not the SDK's or the outbound client's error: a failure of our own code is not the provider's, and
 * must stay a 500 that is reported, never a 502 that blames Stripe.
 */
export function stripeFailure(error: unknown): AppError | undefined {
  if (error instanceof AppError) return error;
  const cause = isStripeError(error) && error.type === 'StripeConnectionError' ? (error as { detail?: unknown }).detail : error;
  if (cause instanceof OutboundError || (isStripeError(error) && error.type === 'StripeConnectionError')) {
    // Ours (the outbound client's deadline) or the SDK's (its timeout signal aborted the call: code ETIMEDOUT).
    const timedOut = cause instanceof OutboundError ? cause.kind === 'timeout' : (cause as { code?: unknown } | undefined)?.code === 'ETIMEDOUT';
    return timedOut
      ? new AppError('UPSTREAM_TIMEOUT', 'The payment provider did not answer in time')
      : new AppError('UPSTREAM_CONNECTION_FAILED', 'The payment provider could not be reached');
  }
  if (!isStripeError(error)) return undefined;
  return new AppError('UPSTREAM_ERROR', 'The payment provider refused the request', error.code ?? error.type);
}

export const billingNotConfigured = () =>
  new AppError('SERVICE_UNAVAILABLE', 'Billing is not configured on this service', 'Set STRIPE_SECRET_KEY (and STRIPE_PRICES) to take payments');
