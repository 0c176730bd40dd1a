import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type Stripe from 'stripe';
import { startFakeStripe, stripeSettings, type FakeStripe } from '../helpers/fake-stripe.ts';
import { startTestApp, type TestApp } from '../helpers/test-app.ts';
import { startWebhookReceiver, type WebhookReceiver } from '../helpers/webhook-receiver.ts';

/**
 * Billing through the real listener, with the official Stripe SDK pointed at a local server that speaks Stripe's
 * wire format, and Stripe's webhooks signed with the SDK's test-header helper: checkout to active, promotion codes,
 * the portal, cancellation, failed payments, redelivered and reordered events, bad signatures, trials and their
 * sweep, the admin views, and isolation between owners.
 */

const WEBHOOK_SECRET = 'whsec_test_billing_secret_0123456789';
const CRON_SECRET = 'cron-secret-for-billing-tests';
let stripe: FakeStripe;
let receiver: WebhookReceiver;
let app: TestApp;
let peer: TestApp;
let origin: string;
let adminToken: string;

const deliver = (evt: Stripe.Event | string, options: { secret?: string; timestamp?: number; tamper?: (payload: string) => string } = {}) => {
  const { payload, signature } = stripe.sign(evt, options.secret ?? WEBHOOK_SECRET, options.timestamp);
  return app.request('POST', '/api/v1/payments/webhook', {
    rawBody: Buffer.from(options.tamper ? options.tamper(payload) : payload),
    headers: { 'content-type': 'application/json', 'stripe-signature': signature },
  });
};
const subscription = async (token: string, on: TestApp = app) => {
  const res = await on.request('GET', '/api/v1/user/subscription', { token });
  expect(res.status, res.text).toBe(200);
  return res.body.data.subscription;
};
const checkout = (token: string, body: Record<string, unknown>) => app.request('POST', '/api/v1/payments/checkout', { token, body });

/** Signs up an owner and takes them through checkout; returns the session and the events Stripe would send. */
async function paidOwner(prefix: string, plan: 'premium' | 'enterprise' = 'premium') {
  const owner = await app.signUp(prefix);
  const res = await checkout(owner.token, { plan });
  expect(res.status, res.text).toBe(201);
  const events = stripe.completeCheckout(res.body.data.checkoutSession.id);
  const subscriptionId = [...stripe.subscriptions.values()].at(-1)!.id as string;
  return { ...owner, sessionId: res.body.data.checkoutSession.id as string, events, subscriptionId };
}

beforeAll(async () => {
  stripe = await startFakeStripe();
  receiver = await startWebhookReceiver();
  const env = {
    ...stripeSettings(stripe, WEBHOOK_SECRET),
    OUTBOUND_ALLOW_HOSTS: `${stripe.hostPort},${receiver.hostPort}`,
    CRON_SECRET,
    ADMIN_EMAILS: 'billing-boss@example.com',
    TRIAL_DAYS: '7',
  };
  app = await startTestApp(env);
  origin = `https://127.0.0.1:${app.port}`;
  peer = await app.startPeer();
  const admin = await app.request('POST', '/api/v1/auth/sign-up', { body: { email: 'billing-boss@example.com', password: 'long enough pw' } });
  adminToken = admin.body.data.token;
});
afterAll(async () => {
  await peer?.stop();
  await app?.stop();
  await stripe?.close();
  await receiver?.close();
});

describe('checkout and the webhook', () => {
  it('checkout creates one customer per owner and a session; completing it makes the plan active, on every instance', async () => {
    const owner = await app.signUp('checkout');
    const first = await checkout(owner.token, { plan: 'premium' });
    expect(first.status, first.text).toBe(201);
    const second = await checkout(owner.token, { plan: 'premium', interval: 'year' });
    expect(second.status).toBe(201);
    expect(second.body.data.checkoutSession).toMatchObject({ id: expect.stringMatching(/^cs_test_/), url: expect.stringContaining('checkout.stripe.test') });
    expect(Date.parse(second.body.data.checkoutSession.expiresAt)).toBeGreaterThan(Date.now());
    const created = stripe.requests.filter((r) => r.path === '/v1/customers');
    expect(created.filter((r) => r.body.metadata?.ownerId === owner.ownerId)).toHaveLength(1);
    const uuid = '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}';
    const mine = stripe.requests.filter((q) => q.method === 'POST' && q.body.metadata?.ownerId === owner.ownerId);
    expect(mine.map((r) => r.path).sort()).toEqual(['/v1/checkout/sessions', '/v1/checkout/sessions', '/v1/customers']);
    for (const r of mine) {
      expect(r.idempotencyKey, r.path).toMatch(
        r.path === '/v1/customers' ? new RegExp(`^customer-${owner.ownerId}$`) : new RegExp(`^checkout-${owner.ownerId}-${uuid}$`),
      );
    }
    const sent = stripe.checkoutSessions.get(second.body.data.checkoutSession.id)!;
    expect(sent.client_reference_id).toBe(owner.ownerId);
    expect(sent.success_url.startsWith(origin)).toBe(true);

    // Not paid yet: still free.
    expect((await subscription(owner.token)).plan).toBe('free');
    const events = stripe.completeCheckout(second.body.data.checkoutSession.id);
    for (const evt of events) {
      const res = await deliver(evt);
      expect(res.status, res.text).toBe(200);
      expect(res.body.data).toMatchObject({ received: true, eventId: evt.id, type: evt.type });
    }
    const sub = await subscription(owner.token);
    expect(sub).toMatchObject({ plan: 'premium', status: 'active', source: 'stripe', interval: 'year', billingConfigured: true, cancelAtPeriodEnd: false });
    expect(Date.parse(sub.currentPeriodEnd) - Date.now()).toBeGreaterThan(300 * 86_400_000);
    expect((await subscription(owner.token, peer)).plan).toBe('premium');
    const me = await peer.request('GET', '/api/v1/auth/me', { token: owner.token });
    expect(me.body.data.owner.plan).toBe('premium');

    const again = await checkout(owner.token, { plan: 'enterprise' });
    expect(again.status).toBe(409);
  });

  it('a redelivered event changes nothing twice; events in reverse order end in Stripe’s current state', async () => {
    const owner = await paidOwner('reorder');
    const cancelAtEnd = stripe.updateSubscription(owner.subscriptionId, { cancel_at_period_end: true });
    const deleted = stripe.deleteSubscription(owner.subscriptionId);
    // Newest first: the deletion, then the older update, then checkout's events.
    const order = [deleted, cancelAtEnd, ...owner.events.reverse()];
    for (const evt of order) expect((await deliver(evt)).body.data.outcome).toBe('applied');
    expect(await subscription(owner.token)).toMatchObject({ plan: 'free', status: 'canceled', source: 'stripe' });
    const repeat = await deliver(deleted);
    expect(repeat.status).toBe(200);
    expect(repeat.body.data.outcome).toBe('duplicate');
  });

  it('cancel at period end keeps the plan until Stripe deletes the subscription', async () => {
    const owner = await paidOwner('cancel');
    for (const evt of owner.events) await deliver(evt);
    await deliver(stripe.updateSubscription(owner.subscriptionId, { cancel_at_period_end: true }));
    expect(await subscription(owner.token)).toMatchObject({ plan: 'premium', status: 'active', cancelAtPeriodEnd: true });
    await deliver(stripe.deleteSubscription(owner.subscriptionId));
    expect(await subscription(owner.token)).toMatchObject({ plan: 'free', status: 'canceled' });
  });

  it('a failed payment makes the subscription past_due (plan kept while Stripe retries) and is announced', async () => {
    const owner = await paidOwner('dunning', 'enterprise');
    for (const evt of owner.events) await deliver(evt);
    const hook = await app.request('POST', '/api/v1/enterprise/webhooks', {
      token: owner.token,
      body: { url: `${receiver.url}/billing`, events: ['invoice.payment_failed', 'subscription.updated'] },
    });
    expect(hook.status, hook.text).toBe(201);
    for (const evt of stripe.failPayment(owner.subscriptionId)) expect((await deliver(evt)).status).toBe(200);
    expect(await subscription(owner.token)).toMatchObject({ plan: 'enterprise', status: 'past_due' });
    let received: { type: string; data: Record<string, unknown> } | undefined;
    for (let i = 0; i < 200 && !received; i++) {
      received = receiver.received.map((r) => JSON.parse(r.body)).find((b) => b.type === 'invoice.payment_failed' && b.data.ownerId === owner.ownerId);
      if (!received) await new Promise((r) => setTimeout(r, 50));
    }
    expect(received?.data).toMatchObject({ stripeSubscriptionId: owner.subscriptionId, amountDue: 1900, currency: 'usd' });
  });

  it('refuses a tampered body, a wrong secret and a stale timestamp with 400, changing nothing', async () => {
    const owner = await paidOwner('forged');
    const [completed] = owner.events;
    const tampered = await deliver(completed!, { tamper: (p) => p.replace('"complete"', '"completE"') });
    expect(tampered.status).toBe(400);
    expect(tampered.body.error.message).toBe('Invalid signature');
    expect((await deliver(completed!, { secret: 'whsec_some_other_secret_00000' })).status).toBe(400);
    expect((await deliver(completed!, { timestamp: Math.floor(Date.now() / 1000) - 301 })).status).toBe(400);
    const unsigned = await app.request('POST', '/api/v1/payments/webhook', {
      rawBody: Buffer.from(JSON.stringify(completed)),
      headers: { 'content-type': 'application/json' },
    });
    expect(unsigned.status).toBe(400);
    expect((await subscription(owner.token)).plan).toBe('free');
    // The genuine delivery still applies afterwards: the refused ones were not recorded.
    expect((await deliver(completed!)).body.data.outcome).toBe('applied');
  });

  it('an event for an older subscription neither replaces a live one nor reopens checkout', async () => {
    const owner = await app.signUp('superseded');
    // A first subscription whose first payment never succeeds: pending (checkout refused), then expired by Stripe.
    const premium = await checkout(owner.token, { plan: 'premium' });
    const first = stripe.completeCheckout(premium.body.data.checkoutSession.id, { status: 'incomplete' });
    for (const evt of first) expect((await deliver(evt)).status).toBe(200);
    const subA = (first[1]!.data.object as Stripe.Subscription).id;
    expect(await subscription(owner.token)).toMatchObject({ plan: 'free', status: 'incomplete' });
    const pending = await checkout(owner.token, { plan: 'enterprise' });
    expect([pending.status, pending.body.error?.code]).toEqual([409, 'CONFLICT']);
    expect((await deliver(stripe.updateSubscription(subA, { status: 'incomplete_expired' }))).body.data.outcome).toBe('applied');
    expect(await subscription(owner.token)).toMatchObject({ plan: 'free', status: 'incomplete_expired' });

    const enterprise = await checkout(owner.token, { plan: 'enterprise' });
    expect(enterprise.status, enterprise.text).toBe(201);
    const second = stripe.completeCheckout(enterprise.body.data.checkoutSession.id);
    for (const evt of second) expect((await deliver(evt)).body.data.outcome).toBe('applied');
    const subB = (second[1]!.data.object as Stripe.Subscription).id;
    expect(await subscription(owner.token)).toMatchObject({ plan: 'enterprise', status: 'active', source: 'stripe' });
    const hook = await app.request('POST', '/api/v1/enterprise/webhooks', {
      token: owner.token,
      body: { url: `${receiver.url}/superseded`, events: ['subscription.created', 'subscription.updated', 'subscription.canceled'] },
    });
    expect(hook.status, hook.text).toBe(201);

    // A late event for A (Stripe retries deliveries for days) arrives.
    const expired = stripe.updateSubscription(subA, {});
    const res = await deliver(expired);
    expect(res.status, res.text).toBe(200);
    expect(res.body.data.outcome).toBe('ignored');
    expect((await deliver(expired)).body.data.outcome).toBe('duplicate');
    expect(await subscription(owner.token)).toMatchObject({ plan: 'enterprise', status: 'active', source: 'stripe', trialAvailable: false });
    expect((await checkout(owner.token, { plan: 'premium' })).status).toBe(409);

    // A later change of B is announced; nothing about A ever was.
    expect((await deliver(stripe.updateSubscription(subB, { cancel_at_period_end: true }))).body.data.outcome).toBe('applied');
    const announced = () => receiver.received.map((r) => JSON.parse(r.body)).filter((b) => b.data?.ownerId === owner.ownerId);
    for (let i = 0; i < 200 && !announced().some((b) => b.data.cancelAtPeriodEnd); i++) await new Promise((r) => setTimeout(r, 50));
    expect(announced().map((b) => [b.type, b.data.stripeSubscriptionId])).toEqual([['subscription.updated', subB]]);
  });

  it('a late event for a cancelled earlier subscription leaves the newer paid one alone', async () => {
    const owner = await paidOwner('resubscribed');
    for (const evt of owner.events) await deliver(evt);
    const staleUpdate = stripe.updateSubscription(owner.subscriptionId, { cancel_at_period_end: true });
    await deliver(stripe.deleteSubscription(owner.subscriptionId));
    expect(await subscription(owner.token)).toMatchObject({ plan: 'free', status: 'canceled' });
    const again = await checkout(owner.token, { plan: 'enterprise' });
    expect(again.status, again.text).toBe(201);
    for (const evt of stripe.completeCheckout(again.body.data.checkoutSession.id)) await deliver(evt);
    expect((await deliver(staleUpdate)).body.data.outcome).toBe('ignored');
    expect(await subscription(owner.token)).toMatchObject({ plan: 'enterprise', status: 'active', cancelAtPeriodEnd: false });
  });

  it('stores nothing of a subscription Stripe answers unreadable, or of another customer’s', async () => {
    const owner = await paidOwner('checked-answer');
    for (const evt of owner.events) await deliver(evt);
    const stored = stripe.subscriptions.get(owner.subscriptionId)!;
    // A status the pinned API version does not have: the provider's fault (502), and the event is not recorded.
    const update = stripe.updateSubscription(owner.subscriptionId, { status: 'suspended', cancel_at_period_end: true });
    const refused = await deliver(update);
    expect([refused.status, refused.body.error?.code], refused.text).toEqual([502, 'UPSTREAM_INVALID_RESPONSE']);
    expect(await subscription(owner.token)).toMatchObject({ plan: 'premium', status: 'active', cancelAtPeriodEnd: false });
    stored.status = 'active';
    expect((await deliver(update)).body.data.outcome).toBe('applied');
    expect(await subscription(owner.token)).toMatchObject({ plan: 'premium', status: 'active', cancelAtPeriodEnd: true });

    // An event naming another owner's customer beside this subscription changes neither owner.
    const other = await app.signUp('checked-answer-other');
    const page = await checkout(other.token, { plan: 'enterprise' });
    const theirCustomer = stripe.checkoutSessions.get(page.body.data.checkoutSession.id)!.customer as string;
    const crossed = stripe.updateSubscription(owner.subscriptionId, {});
    (crossed.data.object as Stripe.Subscription).customer = theirCustomer;
    const res = await deliver(crossed);
    expect([res.status, res.body.data?.outcome], res.text).toEqual([200, 'ignored']);
    expect(await subscription(other.token)).toMatchObject({ plan: 'free', source: 'admin' });
    expect(await subscription(owner.token)).toMatchObject({ plan: 'premium', status: 'active', cancelAtPeriodEnd: true });
  });

  it('ignores event types it does not act on, answering 200', async () => {
    const evt = { id: 'evt_unrelated_1', object: 'event', type: 'charge.refunded', created: Math.floor(Date.now() / 1000), data: { object: { id: 'ch_1' } } };
    const res = await deliver(JSON.stringify(evt));
    expect(res.status).toBe(200);
    expect(res.body.data.outcome).toBe('ignored');
  });
});

describe('one payable Checkout page per owner', () => {
  const sessionsOf = (ownerId: string) => [...stripe.checkoutSessions.values()].filter((session) => session.client_reference_id === ownerId);
  const openSessionsOf = (ownerId: string) => sessionsOf(ownerId).filter((session) => session.status === 'open');

  it('a new checkout expires the page before it, also when several arrive at once; another owner’s page is untouched', async () => {
    const owner = await app.signUp('one-page');
    const other = await app.signUp('one-page-other');
    const theirs = await checkout(other.token, { plan: 'premium' });
    expect(theirs.status, theirs.text).toBe(201);

    const first = await checkout(owner.token, { plan: 'premium' });
    const second = await checkout(owner.token, { plan: 'enterprise' });
    expect([first.status, second.status]).toEqual([201, 201]);
    expect(stripe.checkoutSessions.get(first.body.data.checkoutSession.id)!.status).toBe('expired');
    expect(() => stripe.completeCheckout(first.body.data.checkoutSession.id)).toThrow(/expired/);
    expect(openSessionsOf(owner.ownerId).map((session) => session.id)).toEqual([second.body.data.checkoutSession.id]);

    // Two tabs at once: each answers a page, and one page of all the owner's is left payable.
    const together = await Promise.all([1, 2, 3].map(() => checkout(owner.token, { plan: 'premium' })));
    expect(together.map((res) => res.status)).toEqual([201, 201, 201]);
    expect(sessionsOf(owner.ownerId)).toHaveLength(5);
    const open = openSessionsOf(owner.ownerId);
    expect(open).toHaveLength(1);
    expect(together.map((res) => res.body.data.checkoutSession.id)).toContain(open[0]!.id);

    expect(openSessionsOf(other.ownerId).map((session) => session.id)).toEqual([theirs.body.data.checkoutSession.id]);
  });

  it('a page paid before its webhook arrives makes the next checkout a 409 and expires the page it made', async () => {
    const owner = await app.signUp('paid-meanwhile');
    const page = await checkout(owner.token, { plan: 'premium' });
    const events = stripe.completeCheckout(page.body.data.checkoutSession.id);
    // The webhook is not here yet: the stored state is still free, so only Stripe knows the page was paid.
    expect((await subscription(owner.token)).plan).toBe('free');
    const again = await checkout(owner.token, { plan: 'enterprise' });
    expect([again.status, again.body.error?.code], again.text).toEqual([409, 'CONFLICT']);
    expect(openSessionsOf(owner.ownerId)).toHaveLength(0);
    expect(
      sessionsOf(owner.ownerId)
        .map((session) => session.status)
        .sort(),
    ).toEqual(['complete', 'expired']);

    for (const evt of events) expect((await deliver(evt)).body.data.outcome).toBe('applied');
    expect((await checkout(owner.token, { plan: 'enterprise' })).status).toBe(409);
    // Once that subscription has ended, its paid page is an old purchase: checkout is open again.
    const subscriptionId = (events[1]!.data.object as Stripe.Subscription).id;
    expect((await deliver(stripe.deleteSubscription(subscriptionId))).body.data.outcome).toBe('applied');
    const later = await checkout(owner.token, { plan: 'enterprise' });
    expect(later.status, later.text).toBe(201);
    expect(openSessionsOf(owner.ownerId).map((session) => session.id)).toEqual([later.body.data.checkoutSession.id]);
  });

  it('when Stripe cannot expire the page before, the checkout fails and the next one expires that page', async () => {
    const owner = await app.signUp('expire-outage');
    const first = await checkout(owner.token, { plan: 'premium' });
    const stopFailing = stripe.failWhile((method, path) => method === 'POST' && path.endsWith('/expire'));
    let failed: Awaited<ReturnType<typeof checkout>>;
    try {
      failed = await checkout(owner.token, { plan: 'premium' });
    } finally {
      stopFailing();
    }
    expect([failed.status, failed.body.error?.code], failed.text).toEqual([502, 'UPSTREAM_ERROR']);
    expect(stripe.checkoutSessions.get(first.body.data.checkoutSession.id)!.status).toBe('open');

    const next = await checkout(owner.token, { plan: 'premium' });
    expect(next.status, next.text).toBe(201);
    expect(stripe.checkoutSessions.get(first.body.data.checkoutSession.id)!.status).toBe('expired');
    // The failed request's own page stays open at Stripe until Stripe expires it (24 hours): its url was never shown.
    const open = openSessionsOf(owner.ownerId).map((session) => session.id);
    expect(open).toHaveLength(2);
    expect(open).toContain(next.body.data.checkoutSession.id);
  });
});

describe('promotion codes and coupons', () => {
  beforeAll(() => {
    stripe.addCoupon({ id: 'SPRING', percent_off: 25, duration: 'repeating', duration_in_months: 3 });
    stripe.addCoupon({ id: 'OLD', percent_off: 10, redeem_by: Math.floor(Date.now() / 1000) - 60, valid: false });
    stripe.addCoupon({ id: 'ENTONLY', amount_off: 5000, currency: 'usd', percent_off: null, applies_to: { products: [] } });
    stripe.addPromotionCode({ code: 'SPRING25', coupon: 'SPRING' });
    stripe.addPromotionCode({ code: 'GONE', coupon: 'SPRING', expires_at: Math.floor(Date.now() / 1000) - 10 });
    stripe.addPromotionCode({ code: 'FULL', coupon: 'SPRING', max_redemptions: 5, times_redeemed: 5 });
    stripe.addPromotionCode({
      code: 'NEWONLY',
      coupon: 'SPRING',
      restrictions: { first_time_transaction: true, minimum_amount: null, minimum_amount_currency: null },
    });
  });

  it('validates codes and coupon ids, with the discount and the reason', async () => {
    const owner = await app.signUp('coupons');
    const check = async (code: string, plan?: string) => {
      const res = await app.request('POST', '/api/v1/payments/validate-coupon', { token: owner.token, body: { code, ...(plan ? { plan } : {}) } });
      expect(res.status, res.text).toBe(200);
      return res.body.data.coupon;
    };
    expect(await check('SPRING25', 'premium')).toMatchObject({
      valid: true,
      reason: null,
      couponId: 'SPRING',
      promotionCodeId: expect.stringMatching(/^promo_/),
      discount: { percentOff: 25, amountOff: null, duration: 'repeating', durationInMonths: 3 },
    });
    expect(await check('SPRING')).toMatchObject({ valid: true, couponId: 'SPRING', promotionCodeId: null });
    expect(await check('NOPE')).toMatchObject({ valid: false, reason: 'not_found', discount: null });
    expect(await check('GONE')).toMatchObject({ valid: false, reason: 'expired' });
    expect(await check('FULL')).toMatchObject({ valid: false, reason: 'used_up' });
    expect(await check('OLD')).toMatchObject({ valid: false, reason: 'expired' });
    expect(await check('NEWONLY')).toMatchObject({ valid: true });

    const ent = stripe.coupons.get('ENTONLY')!;
    const entPrice = stripe.prices['enterprise:month']!;
    const product = (await (await fetch(`${stripe.url}/v1/prices/${entPrice}`, { headers: { authorization: `Bearer ${stripe.secretKey}` } })).json()) as {
      product: string;
    };
    ent.applies_to = { products: [product.product] };
    expect(await check('ENTONLY', 'premium')).toMatchObject({ valid: false, reason: 'not_for_plan', discount: { amountOff: 5000, currency: 'usd' } });
    expect(await check('ENTONLY', 'enterprise')).toMatchObject({ valid: true });

    const paid = await paidOwner('returning');
    for (const evt of paid.events) await deliver(evt);
    const again = await app.request('POST', '/api/v1/payments/validate-coupon', { token: paid.token, body: { code: 'NEWONLY' } });
    expect(again.body.data.coupon).toMatchObject({ valid: false, reason: 'first_purchase_only' });
  });

  it('checkout applies a valid promotion code and refuses an invalid one naming the reason', async () => {
    const owner = await app.signUp('promo');
    const ok = await checkout(owner.token, { plan: 'premium', promotionCode: 'SPRING25' });
    expect(ok.status, ok.text).toBe(201);
    const session = stripe.checkoutSessions.get(ok.body.data.checkoutSession.id)!;
    expect(session.discounts).toEqual([{ promotion_code: [...stripe.promotionCodes.values()].find((p) => p.code === 'SPRING25')!.id }]);
    const bad = await checkout(owner.token, { plan: 'premium', promotionCode: 'GONE' });
    expect(bad.status).toBe(400);
    expect(bad.body.error.details).toBe('promotionCode: expired');
    const plain = await checkout(owner.token, { plan: 'premium' });
    expect(stripe.checkoutSessions.get(plain.body.data.checkoutSession.id)!.allow_promotion_codes).toBe(true);
  });
});

describe('the portal, return URLs and input errors', () => {
  it('opens the customer portal for an owner with a customer, 409 before checkout', async () => {
    const owner = await app.signUp('portal');
    const before = await app.request('POST', '/api/v1/payments/portal', { token: owner.token, body: {} });
    expect(before.status).toBe(409);
    await checkout(owner.token, { plan: 'premium' });
    const portal = await app.request('POST', '/api/v1/payments/portal', { token: owner.token, body: { returnUrl: `${origin}/settings` } });
    expect(portal.status, portal.text).toBe(201);
    expect(portal.body.data.portalSession.url).toContain('billing.stripe.test');
  });

  it('refuses return URLs on other origins (no open redirect) and unknown plans', async () => {
    const owner = await app.signUp('redirect');
    const evil = await checkout(owner.token, { plan: 'premium', successUrl: 'https://evil.example/steal' });
    expect(evil.status).toBe(400);
    expect(evil.body.error.details).toMatch(/^successUrl: must be on one of this service's origins/);
    expect((await checkout(owner.token, { plan: 'premium', cancelUrl: 'javascript:alert(1)' })).status).toBe(400);
    expect((await checkout(owner.token, { plan: 'gold' })).status).toBe(400);
    expect((await checkout(owner.token, { plan: 'premium', interval: 'week' })).status).toBe(400);
    expect((await app.request('POST', '/api/v1/payments/portal', { token: owner.token, body: { returnUrl: 'https://evil.example/' } })).status).toBe(400);
    expect((await app.request('POST', '/api/v1/payments/validate-coupon', { token: owner.token, body: {} })).status).toBe(400);
  });

  it('every owner route is 401 without a session and 403 with an API key', async () => {
    const owner = await app.signUp('auth');
    const ci = await app.request('POST', '/api/v1/chat-interfaces', { token: owner.token, body: { name: 'k', endpointUrl: 'https://example.com/bot' } });
    const key = (await app.request('POST', '/api/v1/api-keys', { token: owner.token, body: { name: 'k', chatInterfaceId: ci.body.data.chatInterface.id } }))
      .body.data.key;
    for (const path of [
      '/api/v1/payments/checkout',
      '/api/v1/payments/portal',
      '/api/v1/payments/validate-coupon',
      '/api/v1/payments/webhook-test',
      '/api/v1/user/subscription/trial',
    ]) {
      expect((await app.request('POST', path, { body: { plan: 'premium', code: 'X' } })).status, path).toBe(401);
      expect((await app.request('POST', path, { token: key, body: { plan: 'premium', code: 'X' } })).status, path).toBe(403);
    }
  });
});

describe('trials and the sweep', () => {
  it('an owner starts the one trial; the sweep ends expired trials once, even when run twice at once', async () => {
    const owner = await app.signUp('trial');
    const started = await app.request('POST', '/api/v1/user/subscription/trial', { token: owner.token, body: {} });
    expect(started.status, started.text).toBe(201);
    expect(started.body.data.subscription).toMatchObject({ plan: 'premium', status: 'trialing' });
    expect(Date.parse(started.body.data.subscription.trialEnd) - Date.now()).toBeGreaterThan(6.9 * 86_400_000);
    expect(await subscription(owner.token)).toMatchObject({ plan: 'premium', status: 'trialing', source: 'trial', trialAvailable: false });
    expect((await app.request('POST', '/api/v1/user/subscription/trial', { token: owner.token, body: {} })).status).toBe(409);

    // A second trialist who also subscribes keeps the paid plan when the trial ends.
    const payer = await app.signUp('trial-payer');
    expect((await app.request('POST', '/api/v1/user/subscription/trial', { token: payer.token, body: { plan: 'enterprise' } })).status).toBe(201);
    const co = await checkout(payer.token, { plan: 'premium' });
    for (const evt of stripe.completeCheckout(co.body.data.checkoutSession.id)) await deliver(evt);

    // Time passes: both trials end now.
    const db = app.deps.database.db;
    await db
      .updateTable('billing_accounts')
      .set({ trial_end: new Date(Date.now() - 1000) })
      .where('owner_id', 'in', [owner.ownerId, payer.ownerId])
      .execute();
    const sweep = () => app.request('POST', '/api/v1/cron/trial-expiration', { headers: { authorization: `Bearer ${CRON_SECRET}` } });
    const [a, b] = await Promise.all([sweep(), sweep()]);
    expect(a.status, a.text).toBe(200);
    expect(b.status).toBe(200);
    const ended = [...a.body.data.owners, ...b.body.data.owners].filter((o: { ownerId: string }) => [owner.ownerId, payer.ownerId].includes(o.ownerId));
    expect(ended.sort((x: { ownerId: string }, y: { ownerId: string }) => (x.ownerId === owner.ownerId ? -1 : y.ownerId === owner.ownerId ? 1 : 0))).toEqual([
      { ownerId: owner.ownerId, plan: 'free' },
      { ownerId: payer.ownerId, plan: 'premium' },
    ]);
    expect((await sweep()).body.data.owners.filter((o: { ownerId: string }) => o.ownerId === owner.ownerId)).toEqual([]);
    expect(await subscription(owner.token)).toMatchObject({ plan: 'free', trialAvailable: false });
    expect((await subscription(payer.token)).plan).toBe('premium');
  });

  it('a plan an admin sets during a trial ends the trial; the sweep leaves that plan alone', async () => {
    const owner = await app.signUp('trial-admin');
    expect((await app.request('POST', '/api/v1/user/subscription/trial', { token: owner.token, body: { plan: 'premium' } })).status).toBe(201);
    const changed = await app.request('PATCH', `/api/v1/admin/owners/${owner.ownerId}`, { token: adminToken, body: { plan: 'enterprise' } });
    expect(changed.status, changed.text).toBe(200);
    const sub = await subscription(owner.token);
    expect(sub).toMatchObject({ plan: 'enterprise', status: 'active', source: 'admin', trialEnd: null, trialAvailable: false });

    // The trial's end passes: the sweep has nothing of this owner's to end.
    await app.deps.database.db
      .updateTable('billing_accounts')
      .set({ trial_end: new Date(Date.now() - 1000) })
      .where('owner_id', '=', owner.ownerId)
      .execute();
    const sweep = await app.request('POST', '/api/v1/cron/trial-expiration', { headers: { authorization: `Bearer ${CRON_SECRET}` } });
    expect(sweep.status, sweep.text).toBe(200);
    expect(sweep.body.data.owners.filter((o: { ownerId: string }) => o.ownerId === owner.ownerId)).toEqual([]);
    expect(await subscription(owner.token)).toMatchObject({ plan: 'enterprise', source: 'admin' });
    // A change of role only leaves a running trial alone.
    const other = await app.signUp('trial-role');
    await app.request('POST', '/api/v1/user/subscription/trial', { token: other.token, body: {} });
    expect((await app.request('PATCH', `/api/v1/admin/owners/${other.ownerId}`, { token: adminToken, body: { role: 'owner' } })).status).toBe(200);
    expect(await subscription(other.token)).toMatchObject({ plan: 'premium', status: 'trialing', source: 'trial' });
  });

  it('a trial’s period runs from its start to its end, in the owner’s view and the admin’s', async () => {
    const owner = await app.signUp('trial-period');
    const started = await app.request('POST', '/api/v1/user/subscription/trial', { token: owner.token, body: { plan: 'enterprise' } });
    expect(started.status, started.text).toBe(201);
    const { trialEnd } = started.body.data.subscription;
    const sub = await subscription(owner.token);
    expect(sub).toMatchObject({ source: 'trial', status: 'trialing', currentPeriodEnd: trialEnd, trialEnd });
    const account = await app.deps.database.db
      .selectFrom('billing_accounts')
      .select('trial_started_at')
      .where('owner_id', '=', owner.ownerId)
      .executeTakeFirst();
    expect(sub.currentPeriodStart).toBe(account!.trial_started_at!.toISOString());
    const list = await app.request('GET', '/api/v1/admin/enterprises?limit=200', { token: adminToken });
    expect(list.status, list.text).toBe(200);
    expect(list.body.data.enterprises.find((e: { ownerId: string }) => e.ownerId === owner.ownerId)).toMatchObject({
      source: 'trial',
      status: 'trialing',
      currentPeriodEnd: trialEnd,
    });
  });

  it('the sweep needs the cron secret', async () => {
    expect((await app.request('POST', '/api/v1/cron/trial-expiration')).status).toBe(401);
    expect((await app.request('POST', '/api/v1/cron/trial-expiration', { headers: { authorization: 'Bearer wrong-secret-wrong-secret' } })).status).toBe(401);
    // A valid credential of another kind is the wrong kind: 403, as on every other operation.
    const owner = await app.signUp('cron-owner');
    const withSession = await app.request('POST', '/api/v1/cron/trial-expiration', { token: owner.token });
    expect([withSession.status, withSession.body.error.code]).toEqual([403, 'FORBIDDEN']);
  });
});

describe('webhook-test and the admin views', () => {
  it('webhook-test signs a test event with the configured secret and runs the real verification', async () => {
    const owner = await app.signUp('wh-test');
    const res = await app.request('POST', '/api/v1/payments/webhook-test', { token: owner.token, body: {} });
    expect(res.status, res.text).toBe(200);
    expect(res.body.data.result).toMatchObject({ configured: true, signatureVerified: true, tamperedRejected: true, toleranceSeconds: 300 });
  });

  it('admins page through coupons and promotion codes from Stripe; owners get 403', async () => {
    const owner = await app.signUp('not-admin');
    for (const path of ['/api/v1/admin/coupons', '/api/v1/admin/coupons/SPRING', '/api/v1/admin/coupons/SPRING/promotion-codes', '/api/v1/admin/enterprises']) {
      expect((await app.request('GET', path, { token: owner.token })).status, path).toBe(403);
      expect((await app.request('GET', path)).status, path).toBe(401);
    }
    const first = await app.request('GET', '/api/v1/admin/coupons?limit=2', { token: adminToken });
    expect(first.status, first.text).toBe(200);
    expect(first.body.data.coupons).toHaveLength(2);
    expect(first.body.data.hasMore).toBe(true);
    const next = await app.request('GET', `/api/v1/admin/coupons?limit=2&startingAfter=${first.body.data.nextCursor}`, { token: adminToken });
    expect(next.body.data.coupons[0].id).not.toBe(first.body.data.coupons[0].id);
    const one = await app.request('GET', '/api/v1/admin/coupons/SPRING', { token: adminToken });
    expect(one.body.data.coupon).toMatchObject({ id: 'SPRING', valid: true, discount: { percentOff: 25 } });
    expect((await app.request('GET', '/api/v1/admin/coupons/NOPE', { token: adminToken })).status).toBe(404);
    const codes = await app.request('GET', '/api/v1/admin/coupons/SPRING/promotion-codes?limit=100', { token: adminToken });
    expect(codes.body.data.promotionCodes.map((p: { code: string }) => p.code).sort()).toEqual(['FULL', 'GONE', 'NEWONLY', 'SPRING25']);
    expect((await app.request('GET', '/api/v1/admin/coupons/NOPE/promotion-codes', { token: adminToken })).status).toBe(404);
  });

  it('lists enterprise accounts with their subscription, usage and webhook count', async () => {
    const ent = await paidOwner('enterprise-list', 'enterprise');
    for (const evt of ent.events) await deliver(evt);
    await app.request('POST', '/api/v1/enterprise/webhooks', { token: ent.token, body: { url: `${receiver.url}/e`, events: ['*'] } });
    const res = await app.request('GET', '/api/v1/admin/enterprises?limit=200', { token: adminToken });
    expect(res.status, res.text).toBe(200);
    const row = res.body.data.enterprises.find((e: { ownerId: string }) => e.ownerId === ent.ownerId);
    expect(row).toMatchObject({ email: ent.email, status: 'active', source: 'stripe', webhooks: 1, messagesThisMonth: 0 });
  });
});

describe('without billing configured', () => {
  let plain: TestApp;
  beforeAll(async () => {
    plain = await startTestApp();
  });
  afterAll(async () => {
    await plain?.stop();
  });

  it('payments answer 503 SERVICE_UNAVAILABLE; the subscription still answers; webhook-test says not configured', async () => {
    const owner = await plain.signUp('no-billing');
    const res = await plain.request('POST', '/api/v1/payments/checkout', { token: owner.token, body: { plan: 'premium' } });
    expect(res.status).toBe(503);
    expect(res.body.error).toMatchObject({ code: 'SERVICE_UNAVAILABLE', message: 'Billing is not configured on this service' });
    expect((await plain.request('POST', '/api/v1/payments/validate-coupon', { token: owner.token, body: { code: 'X' } })).status).toBe(503);
    expect((await plain.request('POST', '/api/v1/payments/webhook', { rawBody: Buffer.from('{}'), headers: { 'stripe-signature': 't=1,v1=00' } })).status).toBe(
      503,
    );
    expect((await plain.request('GET', '/api/v1/user/subscription', { token: owner.token })).body.data.subscription).toMatchObject({
      billingConfigured: false,
      plan: 'free',
    });
    const test = await plain.request('POST', '/api/v1/payments/webhook-test', { token: owner.token, body: {} });
    expect(test.body.data.result).toMatchObject({ configured: false, signatureVerified: false });
  });
});
