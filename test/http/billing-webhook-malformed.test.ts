import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeStripe, stripeSettings, type FakeStripe } from '../helpers/fake-stripe.ts';
import { startTestApp, type TestApp } from '../helpers/test-app.ts';

/**
 * The Stripe webhook given bodies that are correctly signed but are not well-formed events: each is the sender's
 * 400 in the error envelope, naming what is wrong, and changes nothing; never a 500 (our crash) or a 502 (blaming
 * Stripe). Real events still apply, and a Stripe call that really fails is still the provider's 502.
 */

const WEBHOOK_SECRET = 'whsec_test_malformed_events_0123456789';
let stripe: FakeStripe;
let app: TestApp;

const deliver = (payload: string, on: TestApp = app) => {
  const { signature } = stripe.sign(payload, WEBHOOK_SECRET);
  return on.request('POST', '/api/v1/payments/webhook', {
    rawBody: Buffer.from(payload),
    headers: { 'content-type': 'application/json', 'stripe-signature': signature },
  });
};
const recordedEvents = async () => (await app.deps.database.db.selectFrom('billing_events').select('id').execute()).map((r) => r.id);
const planOf = async (token: string) => (await app.request('GET', '/api/v1/user/subscription', { token })).body.data.subscription.plan;

/** An owner who went through checkout, with the events Stripe sends for it (not delivered yet). */
async function paidOwner(prefix: string) {
  const owner = await app.signUp(prefix);
  const res = await app.request('POST', '/api/v1/payments/checkout', { token: owner.token, body: { plan: 'premium' } });
  expect(res.status, res.text).toBe(201);
  return { ...owner, events: stripe.completeCheckout(res.body.data.checkoutSession.id) };
}

beforeAll(async () => {
  stripe = await startFakeStripe();
  app = await startTestApp(stripeSettings(stripe, WEBHOOK_SECRET));
});
afterAll(async () => {
  await app?.stop();
  await stripe?.close();
});

describe('signed bodies that are not well-formed events', () => {
  const invoice = { id: 'in_1', customer: 'cus_x', parent: { subscription_details: { subscription: 'sub_x' } } };
  const cases: Array<[string, string, string]> = [
    ['an array', '[]', '(body)'],
    ['a string', '"x"', '(body)'],
    ['null', 'null', '(body)'],
    ['a number for the id, no type', '{"id":1}', 'id'],
    ['no type', '{"id":"evt_no_type"}', 'type'],
    ['a handled type without data', '{"id":"evt_a","type":"checkout.session.completed"}', 'data'],
    ['data null', '{"id":"evt_b","type":"checkout.session.completed","data":null}', 'data'],
    ['data.object null', '{"id":"evt_c","type":"invoice.paid","data":{"object":null}}', 'data.object'],
    ['data.object an array', '{"id":"evt_c2","type":"customer.subscription.updated","data":{"object":[]}}', 'data.object'],
    ['a NUL in the id', JSON.stringify({ id: 'evt_\u0000', type: 'invoice.paid', data: { object: invoice } }), 'id'],
    ['a line break in the type', JSON.stringify({ id: 'evt_d', type: 'invoice.paid\n', data: { object: invoice } }), 'type'],
    [
      'a customer of the wrong type',
      JSON.stringify({ id: 'evt_e', type: 'invoice.paid', data: { object: { ...invoice, customer: 42 } } }),
      'data.object.customer',
    ],
    [
      'a subscription without its id',
      JSON.stringify({ id: 'evt_f', type: 'customer.subscription.deleted', data: { object: { customer: 'cus_x' } } }),
      'data.object.id',
    ],
    [
      'a failed invoice without its amount',
      JSON.stringify({ id: 'evt_g', type: 'invoice.payment_failed', data: { object: { ...invoice, currency: 'usd', attempt_count: 1 } } }),
      'data.object.amount_due',
    ],
  ];
  it.each(cases)('%s: 400 VALIDATION_FAILED naming it, nothing recorded', async (_name, payload, field) => {
    const res = await deliver(payload);
    expect(res.status, res.text).toBe(400);
    expect(res.body).toMatchObject({ success: false, error: { code: 'VALIDATION_FAILED', message: 'Not a well-formed Stripe event' } });
    expect(res.body.error.details.startsWith(`${field}: `), res.body.error.details).toBe(true);
    expect(await recordedEvents()).toEqual([]);
  });

  it('a signed body that is not JSON is malformed JSON, not a bad signature', async () => {
    const res = await deliver('{"id":"evt_h",');
    expect(res.status, res.text).toBe(400);
    expect(res.body.error).toMatchObject({ code: 'MALFORMED_JSON', message: 'Malformed JSON body' });
  });
});

describe('well-formed events', () => {
  it('one of a type we do not act on is still answered 200 ignored, whatever its data', async () => {
    for (const payload of ['{"id":"evt_other_1","type":"charge.refunded"}', '{"id":"evt_other_2","type":"charge.refunded","data":null}']) {
      const res = await deliver(payload);
      expect(res.status, res.text).toBe(200);
      expect(res.body.data).toEqual({ received: true, eventId: JSON.parse(payload).id, type: 'charge.refunded', outcome: 'ignored' });
    }
  });

  it('a checkout another integration made (client_reference_id not one of our ids) is ignored, not a failure', async () => {
    const payload = JSON.stringify({
      id: 'evt_payment_link',
      object: 'event',
      type: 'checkout.session.completed',
      data: { object: { id: 'cs_1', customer: 'cus_unknown', subscription: 'sub_unknown', client_reference_id: 'order-1234' } },
    });
    const res = await deliver(payload);
    expect(res.status, res.text).toBe(200);
    expect(res.body.data.outcome).toBe('ignored');
  });

  it('a real checkout’s events still apply', async () => {
    const owner = await paidOwner('still-works');
    for (const evt of owner.events) {
      const res = await deliver(JSON.stringify(evt));
      expect(res.status, res.text).toBe(200);
      expect(res.body.data).toMatchObject({ received: true, eventId: evt.id, type: evt.type });
    }
    expect(await planOf(owner.token)).toBe('premium');
    expect(await recordedEvents()).toEqual(expect.arrayContaining(owner.events.map((e) => e.id)));
  });

  it('a Stripe call that really fails is still the provider’s 502, and the event is not recorded', async () => {
    const owner = await paidOwner('stripe-refuses');
    const peer = await app.startPeer({ STRIPE_SECRET_KEY: 'sk_test_not_the_right_key' });
    try {
      const [completed] = owner.events;
      const res = await deliver(JSON.stringify(completed), peer);
      expect(res.status, res.text).toBe(502);
      expect(res.body.error).toMatchObject({ code: 'UPSTREAM_ERROR', message: 'The payment provider refused the request' });
      expect(await recordedEvents()).not.toContain(completed!.id);
    } finally {
      await peer.stop();
    }
  });
});
