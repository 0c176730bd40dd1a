import { describe, expect, it } from 'vitest';
import { AppError } from '../../schema/errors.ts';
import type Stripe from 'stripe';
import { checkRetrievedSubscription, isHandledEventType, parseStripeEvent } from './stripe-event-shape.ts';

const refusal = (payload: string) => {
  try {
    parseStripeEvent(payload);
  } catch (error) {
    expect(error).toBeInstanceOf(AppError);
    return { code: (error as AppError).code, details: (error as AppError).details };
  }
  throw new Error(`accepted: ${payload}`);
};
const event = (type: string, object: unknown) => JSON.stringify({ id: 'evt_1', object: 'event', type, data: { object } });
const invoice = { id: 'in_1', customer: 'cus_1', parent: { subscription_details: { subscription: 'sub_1' } } };

describe('parseStripeEvent', () => {
  it('returns a well-formed event as it was sent', () => {
    const payload = event('invoice.paid', { ...invoice, lines: { data: [] } });
    expect(parseStripeEvent(payload)).toEqual(JSON.parse(payload));
  });

  it('accepts references as ids, expanded objects or null, and an unhandled type with any data', () => {
    expect(() =>
      parseStripeEvent(event('checkout.session.completed', { customer: { id: 'cus_1' }, subscription: null, client_reference_id: null })),
    ).not.toThrow();
    expect(() => parseStripeEvent(event('invoice.paid', { customer: 'cus_1', parent: null }))).not.toThrow();
    expect(() => parseStripeEvent('{"id":"evt_2","type":"charge.refunded","data":null}')).not.toThrow();
  });

  it('refuses what is not JSON, not an object, or has no usable id and type, naming the field', () => {
    expect(refusal('{"id":')).toMatchObject({ code: 'MALFORMED_JSON' });
    for (const body of ['[]', '"x"', 'null', '3'])
      expect(refusal(body)).toEqual({ code: 'VALIDATION_FAILED', details: '(body): must be a JSON object (a Stripe event)' });
    expect(refusal('{"id":1}').details).toMatch(/^id: .*; type: /);
    expect(refusal(JSON.stringify({ id: 'evt_\u0000', type: 'charge.refunded' })).details).toBe(
      'id: must not contain control characters or unpaired surrogates',
    );
    expect(refusal(JSON.stringify({ id: 'evt_\ud800', type: 'charge.refunded' })).details).toMatch(/^id: /);
    expect(refusal(JSON.stringify({ id: '', type: 'charge.refunded' })).details).toMatch(/^id: /);
  });

  it('refuses a handled type whose object is missing or of the wrong shape', () => {
    expect(refusal('{"id":"evt_1","type":"checkout.session.completed"}').details).toMatch(/^data: /);
    expect(refusal(event('invoice.paid', null)).details).toMatch(/^data\.object: /);
    expect(refusal(event('invoice.paid', { ...invoice, customer: 42 })).details).toBe('data.object.customer: must be an id, an object with its id, or null');
    expect(refusal(event('invoice.paid', { ...invoice, parent: { subscription_details: { subscription: { object: 'subscription' } } } })).details).toMatch(
      /^data\.object\.parent\.subscription_details\.subscription: /,
    );
    expect(refusal(event('customer.subscription.updated', { customer: 'cus_1' })).details).toMatch(/^data\.object\.id: /);
    expect(
      refusal(event('invoice.payment_failed', { ...invoice, amount_due: 1900, currency: 'usd', attempt_count: 1, next_payment_attempt: 1e20 })).details,
    ).toMatch(/^data\.object\.next_payment_attempt: /);
  });

  it('knows the handled types and nothing inherited', () => {
    expect(isHandledEventType('invoice.paid')).toBe(true);
    expect(isHandledEventType('charge.refunded')).toBe(false);
    expect(isHandledEventType('constructor')).toBe(false);
  });
});

describe('checkRetrievedSubscription', () => {
  const subscription = {
    id: 'sub_1',
    object: 'subscription',
    customer: 'cus_1',
    status: 'active',
    created: 1_790_000_000,
    cancel_at_period_end: false,
    trial_end: null,
    metadata: { plan: 'premium' },
    items: { data: [{ price: { id: 'price_1', recurring: { interval: 'month' } }, current_period_start: 1_790_000_000, current_period_end: 1_792_600_000 }] },
  };
  const problem = (answer: Record<string, unknown>, requested = 'sub_1') => {
    try {
      checkRetrievedSubscription(answer as unknown as Stripe.Subscription, requested);
    } catch (error) {
      expect(error).toBeInstanceOf(AppError);
      expect((error as AppError).code).toBe('UPSTREAM_INVALID_RESPONSE');
      return (error as AppError).details;
    }
    return null;
  };

  it('passes the subscription asked for, with an expanded customer or one without items', () => {
    expect(problem(subscription)).toBeNull();
    expect(problem({ ...subscription, customer: { id: 'cus_1', object: 'customer' }, items: null })).toBeNull();
  });

  it('refuses another subscription, a status this API version lacks, and times a Date cannot hold', () => {
    expect(problem(subscription, 'sub_2')).toBe('id: not sub_2');
    expect(problem({ ...subscription, status: 'suspended' })).toMatch(/^status: /);
    expect(problem({ ...subscription, customer: null })).toMatch(/^customer: /);
    expect(problem({ ...subscription, created: 1e20 })).toMatch(/^created: /);
    expect(problem({ ...subscription, items: { data: [{ current_period_end: -5 }] } })).toMatch(/^items\.data\.0\.current_period_end: /);
    expect(problem({ ...subscription, id: 'sub_\u0000' }, 'sub_\u0000')).toMatch(/^id: /);
  });
});
