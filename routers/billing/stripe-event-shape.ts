import { z } from 'zod';
import type { Stripe } from '../../adapters/outbound/billing/stripe-client.ts';
import { CONTROL_CHARACTER } from '../../schema/common.ts';
import { AppError, describeIssues } from '../../schema/errors.ts';
import { findIllFormedText } from '../../schema/text-input.ts';
import { SUBSCRIPTION_STATUSES } from './plan-state.ts';

/**
 * A signed webhook body is Stripe's, but not necessarily a well-formed event (a test tool, a hand-made payload, a
 * leaked secret): everything the handlers read is checked here first, so a malformed body is the sender's 400
 * and never reaches the database or a Stripe call as a crash (500) or a provider failure (502).
 */

/** An id or event type: Stripe writes short ASCII, so a control character or text PostgreSQL cannot store is not one. */
const stripeText = z
  .string()
  .min(1)
  .max(255)
  .refine((text) => !CONTROL_CHARACTER.test(text) && findIllFormedText(text) === null, 'must not contain control characters or unpaired surrogates');

/** Another object as Stripe names it: its id, or the object expanded (with its id). */
const named = z.union([stripeText, z.looseObject({ id: stripeText })], { error: 'must be an id, an object with its id, or null' });
/** A reference an event may leave empty. */
const reference = named.nullish();

/** Seconds since the epoch that a Date can hold and print (up to the year 9999). */
const unixSeconds = z.number().int().min(0).max(253_402_300_799);

const subscriptionObject = z.looseObject({ id: stripeText, customer: reference });
const invoiceObject = z.looseObject({
  id: stripeText.nullish(),
  customer: reference,
  parent: z.looseObject({ subscription_details: z.looseObject({ subscription: reference }).nullish() }).nullish(),
});

/** The event types we act on, each with the shape of the `data.object` fields its handler reads. */
const HANDLED_OBJECTS = new Map<string, z.ZodType>([
  ['checkout.session.completed', z.looseObject({ subscription: reference, customer: reference, client_reference_id: z.string().max(255).nullish() })],
  ['customer.subscription.created', subscriptionObject],
  ['customer.subscription.updated', subscriptionObject],
  ['customer.subscription.deleted', subscriptionObject],
  ['customer.subscription.trial_will_end', subscriptionObject],
  ['invoice.paid', invoiceObject],
  [
    'invoice.payment_failed',
    invoiceObject.extend({
      amount_due: z.number().int(),
      currency: stripeText,
      attempt_count: z.number().int().min(0),
      next_payment_attempt: unixSeconds.nullish(),
    }),
  ],
]);

export const isHandledEventType = (type: string) => HANDLED_OBJECTS.has(type);

const envelope = z.looseObject({ id: stripeText, type: stripeText });

const malformed = (details: string) => new AppError('VALIDATION_FAILED', 'Not a well-formed Stripe event', details);

/**
 * Parses a verified webhook body. An event of a type we do not act on needs only its id and type (it is answered
 * `ignored`); one we act on also needs the fields of its object that we read.
 */
export function parseStripeEvent(payload: string): Stripe.Event {
  let body: unknown;
  try {
    body = JSON.parse(payload);
  } catch (error) {
    throw new AppError('MALFORMED_JSON', 'Malformed JSON body', (error as Error).message);
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw malformed('(body): must be a JSON object (a Stripe event)');
  const head = envelope.safeParse(body);
  if (!head.success) throw malformed(describeIssues(head.error.issues));
  const object = HANDLED_OBJECTS.get(head.data.type);
  if (object) {
    const full = z.looseObject({ data: z.looseObject({ object }) }).safeParse(body);
    if (!full.success) throw malformed(describeIssues(full.error.issues));
  }
  return body as Stripe.Event;
}

/** The fields of a subscription Stripe answers that we store or decide by. */
const retrievedSubscription = z.looseObject({
  id: stripeText,
  customer: named,
  status: z.enum(SUBSCRIPTION_STATUSES),
  created: unixSeconds,
  cancel_at_period_end: z.boolean(),
  trial_end: unixSeconds.nullish(),
  metadata: z.record(z.string(), z.string()).nullish(),
  items: z
    .looseObject({
      data: z.array(
        z.looseObject({
          price: z.looseObject({ id: stripeText, recurring: z.looseObject({ interval: z.string() }).nullish() }).nullish(),
          current_period_start: unixSeconds.nullish(),
          current_period_end: unixSeconds.nullish(),
        }),
      ),
    })
    .nullish(),
});

/**
 * Checks the subscription Stripe answered for `requestedId` before anything of it is stored: the one asked for, with
 * a status this API version has and times a Date can hold. Otherwise the answer is the provider's fault (502), and
 * Stripe delivers the event again later.
 */
export function checkRetrievedSubscription(answer: Stripe.Subscription, requestedId: string): Stripe.Subscription {
  const parsed = retrievedSubscription.safeParse(answer);
  const problem = !parsed.success ? describeIssues(parsed.error.issues) : parsed.data.id !== requestedId ? `id: not ${requestedId}` : null;
  if (problem) throw new AppError('UPSTREAM_INVALID_RESPONSE', 'The payment provider answered a subscription that cannot be used', problem);
  return answer;
}
