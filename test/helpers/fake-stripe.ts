import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomBytes } from 'node:crypto';
import { parse as parseForm } from 'qs';
import Stripe from 'stripe';

/**
 * A local server that speaks Stripe's wire format for the objects the service uses: form-encoded requests with
 * bracketed keys, `Authorization: Bearer sk_…`, `Idempotency-Key` replay, JSON objects with `object` fields, list
 * envelopes with `has_more` and `starting_after`, and Stripe's error bodies. The real SDK is pointed at it.
 * Test controls (completing a checkout, changing a subscription) change its state and return the events Stripe
 * would send, which the test signs with the SDK's test-header helper.
 */

type Obj = Record<string, any>;

export interface FakeStripe {
  url: string;
  hostPort: string;
  secretKey: string;
  prices: Record<string, string>;
  /** Every request received: method, path, parsed body, idempotency key. */
  requests: Array<{ method: string; path: string; body: Obj; idempotencyKey?: string }>;
  customers: Map<string, Obj>;
  checkoutSessions: Map<string, Obj>;
  subscriptions: Map<string, Obj>;
  coupons: Map<string, Obj>;
  promotionCodes: Map<string, Obj>;
  addCoupon(coupon: Partial<Obj> & { id: string }): Obj;
  addPromotionCode(code: Partial<Obj> & { code: string; coupon: string }): Obj;
  /** The customer pays an open session: it completes and a subscription exists. Returns the events Stripe sends. */
  completeCheckout(sessionId: string, options?: { status?: string; trialDays?: number }): Stripe.Event[];
  /** Changes a subscription as the portal or Stripe's dunning would; returns customer.subscription.updated. */
  updateSubscription(id: string, changes: Partial<Obj>): Stripe.Event;
  /** Ends a subscription; returns customer.subscription.deleted. */
  deleteSubscription(id: string): Stripe.Event;
  /** A renewal payment fails: past_due, and invoice.payment_failed. */
  failPayment(subscriptionId: string): Stripe.Event[];
  trialWillEnd(subscriptionId: string): Stripe.Event;
  sign(event: Stripe.Event | string, secret: string, timestamp?: number): { payload: string; signature: string };
  /** Until the returned function is called, requests `matches` picks are answered as Stripe's own outage: 500 api_error. */
  failWhile(matches: (method: string, path: string) => boolean): () => void;
  close(): Promise<void>;
}

const id = (prefix: string) => `${prefix}_${randomBytes(12).toString('hex')}`;
const now = () => Math.floor(Date.now() / 1000);
const list = (data: Obj[], url: string, hasMore = false) => ({ object: 'list', data, has_more: hasMore, url });

function page(all: Obj[], query: URLSearchParams, url: string) {
  const limit = Math.min(Number(query.get('limit') ?? 10), 100);
  const after = query.get('starting_after');
  const start = after ? all.findIndex((o) => o.id === after) + 1 : 0;
  const slice = all.slice(start, start + limit);
  return list(slice, url, start + limit < all.length);
}

/** The service's settings that point it at this fake: its key, API URL, prices and outbound allowance. */
export function stripeSettings(stripe: FakeStripe, webhookSecret: string) {
  return {
    STRIPE_SECRET_KEY: stripe.secretKey,
    STRIPE_WEBHOOK_SECRET: webhookSecret,
    STRIPE_API_URL: stripe.url,
    STRIPE_PRICES: Object.entries(stripe.prices)
      .map(([plan, price]) => `${plan}=${price}`)
      .join(','),
    OUTBOUND_ALLOW_HOSTS: stripe.hostPort,
  };
}

export async function startFakeStripe(): Promise<FakeStripe> {
  const secretKey = `sk_test_${randomBytes(16).toString('hex')}`;
  const customers = new Map<string, Obj>();
  const checkoutSessions = new Map<string, Obj>();
  const subscriptions = new Map<string, Obj>();
  const coupons = new Map<string, Obj>();
  const promotionCodes = new Map<string, Obj>();
  const idempotent = new Map<string, { status: number; body: Obj }>();
  const requests: FakeStripe['requests'] = [];
  const products = { premium: id('prod'), enterprise: id('prod') };
  const priceObjects = new Map<string, Obj>();
  const prices: Record<string, string> = {};
  for (const plan of ['premium', 'enterprise'] as const) {
    for (const interval of ['month', 'year'] as const) {
      const price = {
        id: id('price'),
        object: 'price',
        active: true,
        currency: 'usd',
        product: products[plan],
        recurring: { interval, interval_count: 1 },
        unit_amount: 1900,
        type: 'recurring',
        livemode: false,
        metadata: {},
      };
      priceObjects.set(price.id, price);
      prices[`${plan}:${interval}`] = price.id;
    }
  }

  const event = (type: string, object: Obj): Stripe.Event =>
    ({
      id: id('evt'),
      object: 'event',
      api_version: '2026-10-28.endive',
      created: now(),
      data: { object: structuredClone(object) },
      livemode: false,
      pending_webhooks: 1,
      request: { id: null, idempotency_key: null },
      type,
    }) as unknown as Stripe.Event;

  const notFound = (kind: string, what: string) => ({
    status: 404,
    body: { error: { type: 'invalid_request_error', code: 'resource_missing', message: `No such ${kind}: '${what}'`, param: 'id' } },
  });
  const invalid = (message: string, param: string) => ({ status: 400, body: { error: { type: 'invalid_request_error', message, param } } });

  function route(method: string, path: string, query: URLSearchParams, body: Obj): { status: number; body: Obj } {
    const parts = path.split('/').filter(Boolean); // ['v1', ...]
    const [, resource, first, second] = parts;
    if (method === 'POST' && resource === 'customers' && !first) {
      const customer = {
        id: id('cus'),
        object: 'customer',
        email: body.email ?? null,
        name: body.name ?? null,
        metadata: body.metadata ?? {},
        created: now(),
        livemode: false,
      };
      customers.set(customer.id, customer);
      return { status: 200, body: customer };
    }
    if (resource === 'checkout' && first === 'sessions' && second) {
      const session = checkoutSessions.get(second);
      if (!session) return notFound('checkout.session', second);
      const { _price, _subscriptionMetadata, ...visible } = session;
      if (method === 'GET' && !parts[4]) return { status: 200, body: visible };
      if (method === 'POST' && parts[4] === 'expire') {
        if (session.status !== 'open') {
          return invalid(
            `Only Checkout Sessions with a status in ["open"] can be expired. This Checkout Session has a status of ${session.status}.`,
            'session',
          );
        }
        session.status = 'expired';
        return { status: 200, body: { ...visible, status: 'expired' } };
      }
    }
    if (method === 'POST' && resource === 'checkout' && first === 'sessions' && !second) {
      if (!customers.has(body.customer)) return notFound('customer', body.customer);
      const price = body.line_items?.[0]?.price;
      if (!priceObjects.has(price)) return notFound('price', price);
      if (body.discounts && body.allow_promotion_codes)
        return invalid('You may only specify one of these parameters: allow_promotion_codes, discounts.', 'discounts');
      const session = {
        id: id('cs_test'),
        object: 'checkout.session',
        mode: body.mode,
        status: 'open',
        customer: body.customer,
        client_reference_id: body.client_reference_id ?? null,
        success_url: body.success_url,
        cancel_url: body.cancel_url,
        metadata: body.metadata ?? {},
        discounts: body.discounts ?? [],
        allow_promotion_codes: body.allow_promotion_codes === 'true',
        subscription: null,
        expires_at: now() + 24 * 3600,
        url: '',
        livemode: false,
        _price: price,
        _subscriptionMetadata: body.subscription_data?.metadata ?? {},
      };
      session.url = `https://checkout.stripe.test/c/pay/${session.id}`;
      checkoutSessions.set(session.id, session);
      const { _price, _subscriptionMetadata, ...visible } = session;
      return { status: 200, body: visible };
    }
    if (method === 'POST' && resource === 'billing_portal' && first === 'sessions') {
      if (!customers.has(body.customer)) return notFound('customer', body.customer);
      const sessionId = id('bps');
      return {
        status: 200,
        body: {
          id: sessionId,
          object: 'billing_portal.session',
          customer: body.customer,
          return_url: body.return_url ?? null,
          url: `https://billing.stripe.test/p/session/${sessionId}`,
          created: now(),
          livemode: false,
        },
      };
    }
    if (method === 'GET' && resource === 'subscriptions' && first) {
      const sub = subscriptions.get(first);
      return sub ? { status: 200, body: sub } : notFound('subscription', first);
    }
    if (method === 'GET' && resource === 'prices' && first) {
      const price = priceObjects.get(first);
      return price ? { status: 200, body: price } : notFound('price', first);
    }
    if (method === 'GET' && resource === 'coupons') {
      if (first) {
        const coupon = coupons.get(decodeURIComponent(first));
        return coupon ? { status: 200, body: coupon } : notFound('coupon', first);
      }
      return { status: 200, body: page([...coupons.values()], query, '/v1/coupons') };
    }
    if (method === 'GET' && resource === 'promotion_codes' && !first) {
      let all = [...promotionCodes.values()];
      const code = query.get('code');
      if (code) all = all.filter((p) => p.code.toLowerCase() === code.toLowerCase());
      const coupon = query.get('coupon');
      if (coupon) all = all.filter((p) => p.promotion.coupon === coupon);
      return { status: 200, body: page(all, query, '/v1/promotion_codes') };
    }
    return { status: 404, body: { error: { type: 'invalid_request_error', message: `Unrecognized request URL (${method}: ${path}).` } } };
  }

  let failing: ((method: string, path: string) => boolean) | undefined;
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    let raw = '';
    req.on('data', (c) => (raw += c));
    req.on('end', () => {
      const url = new URL(req.url ?? '/', 'http://localhost');
      const reply = (status: number, body: Obj) => {
        res.writeHead(status, { 'content-type': 'application/json', 'request-id': id('req') }).end(JSON.stringify(body));
      };
      if (req.headers.authorization !== `Bearer ${secretKey}`) {
        return reply(401, { error: { type: 'invalid_request_error', message: 'Invalid API Key provided' } });
      }
      const body = parseForm(raw) as Obj;
      const key = req.headers['idempotency-key'] as string | undefined;
      requests.push({ method: req.method ?? 'GET', path: url.pathname, body, idempotencyKey: key });
      if (req.method === 'POST' && key && idempotent.has(key)) {
        const saved = idempotent.get(key)!;
        res.setHeader('idempotent-replayed', 'true');
        return reply(saved.status, saved.body);
      }
      if (failing?.(req.method ?? 'GET', url.pathname)) return reply(500, { error: { type: 'api_error', message: 'An unknown error occurred' } });
      const result = route(req.method ?? 'GET', url.pathname, url.searchParams, body);
      if (req.method === 'POST' && key) idempotent.set(key, result);
      reply(result.status, result.body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;

  function makeSubscription(session: Obj, status: string, trialDays?: number): Obj {
    const price = priceObjects.get(session._price)!;
    const start = now();
    const period = price.recurring.interval === 'year' ? 365 * 86400 : 30 * 86400;
    return {
      id: id('sub'),
      object: 'subscription',
      customer: session.customer,
      status,
      cancel_at_period_end: false,
      canceled_at: null,
      ended_at: null,
      trial_end: trialDays ? start + trialDays * 86400 : null,
      metadata: session._subscriptionMetadata,
      created: start,
      livemode: false,
      discounts: session.discounts.map((d: Obj) => d.promotion_code),
      items: {
        object: 'list',
        data: [{ id: id('si'), object: 'subscription_item', price, quantity: 1, current_period_start: start, current_period_end: start + period }],
        has_more: false,
        url: '/v1/subscription_items',
      },
    };
  }

  const invoiceFor = (sub: Obj, paid: boolean) => ({
    id: id('in'),
    object: 'invoice',
    customer: sub.customer,
    status: paid ? 'paid' : 'open',
    amount_due: 1900,
    currency: 'usd',
    attempt_count: paid ? 1 : 2,
    next_payment_attempt: paid ? null : now() + 3 * 86400,
    parent: { type: 'subscription_details', subscription_details: { subscription: sub.id, metadata: sub.metadata }, quote_details: null },
  });

  return {
    url: `http://127.0.0.1:${port}`,
    hostPort: `127.0.0.1:${port}`,
    secretKey,
    prices,
    requests,
    customers,
    checkoutSessions,
    subscriptions,
    coupons,
    promotionCodes,
    addCoupon(partial) {
      const coupon = {
        object: 'coupon',
        amount_off: null,
        currency: null,
        duration: 'once',
        duration_in_months: null,
        max_redemptions: null,
        times_redeemed: 0,
        redeem_by: null,
        percent_off: 25,
        valid: true,
        name: null,
        created: now(),
        livemode: false,
        metadata: {},
        ...partial,
      };
      coupons.set(coupon.id, coupon);
      return coupon;
    },
    addPromotionCode({ coupon, ...partial }) {
      const code = {
        id: id('promo'),
        object: 'promotion_code',
        active: true,
        customer: null,
        expires_at: null,
        max_redemptions: null,
        times_redeemed: 0,
        restrictions: { first_time_transaction: false, minimum_amount: null, minimum_amount_currency: null },
        created: now(),
        livemode: false,
        metadata: {},
        promotion: { type: 'coupon', coupon },
        ...partial,
      };
      promotionCodes.set(code.id, code);
      return code;
    },
    completeCheckout(sessionId, options = {}) {
      const session = checkoutSessions.get(sessionId);
      if (!session) throw new Error(`no checkout session ${sessionId}`);
      // Stripe's Checkout page takes no payment once the session is expired or complete.
      if (session.status !== 'open') throw new Error(`checkout session ${sessionId} is ${session.status}`);
      const sub = makeSubscription(session, options.status ?? (options.trialDays ? 'trialing' : 'active'), options.trialDays);
      subscriptions.set(sub.id, sub);
      Object.assign(session, { status: 'complete', subscription: sub.id, payment_status: 'paid' });
      const { _price, _subscriptionMetadata, ...visible } = session;
      return [event('checkout.session.completed', visible), event('customer.subscription.created', sub), event('invoice.paid', invoiceFor(sub, true))];
    },
    updateSubscription(subId, changes) {
      const sub = subscriptions.get(subId)!;
      Object.assign(sub, changes);
      return event('customer.subscription.updated', sub);
    },
    deleteSubscription(subId) {
      const sub = subscriptions.get(subId)!;
      Object.assign(sub, { status: 'canceled', ended_at: now(), canceled_at: now() });
      return event('customer.subscription.deleted', sub);
    },
    failPayment(subId) {
      const sub = subscriptions.get(subId)!;
      sub.status = 'past_due';
      return [event('invoice.payment_failed', invoiceFor(sub, false)), event('customer.subscription.updated', sub)];
    },
    trialWillEnd(subId) {
      return event('customer.subscription.trial_will_end', subscriptions.get(subId)!);
    },
    failWhile(matches) {
      failing = matches;
      return () => {
        failing = undefined;
      };
    },
    sign(evt, secret, timestamp) {
      const payload = typeof evt === 'string' ? evt : JSON.stringify(evt);
      return { payload, signature: Stripe.webhooks.generateTestHeaderString({ payload, secret, ...(timestamp !== undefined ? { timestamp } : {}) }) };
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
