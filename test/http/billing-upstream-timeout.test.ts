import { createServer, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import Stripe from 'stripe';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/test-app.ts';

/**
 * A payment provider that accepts connections and never answers: checkout and the webhook answer 504
 * UPSTREAM_TIMEOUT once OUTBOUND_TIMEOUT_MS has passed (one deadline for the whole call, no retry after a
 * timeout), as the document promises, not a 502 after three timeouts.
 */

const WEBHOOK_SECRET = 'whsec_test_upstream_timeout_0123456789';
const TIMEOUT_MS = 1000;
let silent: Server;
let app: TestApp;
const connections: Socket[] = [];

beforeAll(async () => {
  silent = createServer((socket) => {
    connections.push(socket);
    socket.on('error', () => {});
  });
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
  const hostPort = `127.0.0.1:${(silent.address() as AddressInfo).port}`;
  app = await startTestApp({
    STRIPE_SECRET_KEY: 'sk_test_silent_provider',
    STRIPE_WEBHOOK_SECRET: WEBHOOK_SECRET,
    STRIPE_API_URL: `http://${hostPort}`,
    STRIPE_PRICES: 'premium:month=price_premium_month,enterprise:month=price_enterprise_month',
    OUTBOUND_ALLOW_HOSTS: hostPort,
    OUTBOUND_TIMEOUT_MS: String(TIMEOUT_MS),
  });
});
afterAll(async () => {
  await app?.stop();
  for (const socket of connections) socket.destroy();
  await new Promise<void>((resolve) => silent?.close(() => resolve()));
});

/** Runs a call and reports how long it took and how many connections the provider saw meanwhile. */
async function timed(call: () => Promise<{ status: number; body: any; text: string }>) {
  const before = connections.length;
  const started = Date.now();
  const res = await call();
  return { res, elapsed: Date.now() - started, connections: connections.length - before };
}

describe('a payment provider that never answers', () => {
  it('checkout is a 504 UPSTREAM_TIMEOUT after OUTBOUND_TIMEOUT_MS, on one connection', async () => {
    const owner = await app.signUp('silent-checkout');
    const {
      res,
      elapsed,
      connections: opened,
    } = await timed(() => app.request('POST', '/api/v1/payments/checkout', { token: owner.token, body: { plan: 'premium' } }));
    expect(res.status, res.text).toBe(504);
    expect(res.body.error).toMatchObject({ code: 'UPSTREAM_TIMEOUT', message: 'The payment provider did not answer in time' });
    expect(elapsed).toBeGreaterThanOrEqual(TIMEOUT_MS - 50);
    expect(elapsed).toBeLessThan(TIMEOUT_MS + 3000);
    expect(opened).toBe(1);
  });

  it('the webhook is a 504 UPSTREAM_TIMEOUT too, and the event is not recorded (Stripe delivers it again)', async () => {
    const owner = await app.signUp('silent-webhook');
    const payload = JSON.stringify({
      id: 'evt_silent_provider',
      object: 'event',
      type: 'checkout.session.completed',
      created: Math.floor(Date.now() / 1000),
      data: { object: { id: 'cs_silent', customer: 'cus_silent', subscription: 'sub_silent', client_reference_id: owner.ownerId } },
    });
    const signature = Stripe.webhooks.generateTestHeaderString({ payload, secret: WEBHOOK_SECRET });
    const {
      res,
      elapsed,
      connections: opened,
    } = await timed(() =>
      app.request('POST', '/api/v1/payments/webhook', {
        rawBody: Buffer.from(payload),
        headers: { 'content-type': 'application/json', 'stripe-signature': signature },
      }),
    );
    expect(res.status, res.text).toBe(504);
    expect(res.body.error.code).toBe('UPSTREAM_TIMEOUT');
    expect(elapsed).toBeLessThan(TIMEOUT_MS + 3000);
    expect(opened).toBe(1);
    const recorded = await app.deps.database.db.selectFrom('billing_events').select('id').where('id', '=', 'evt_silent_provider').execute();
    expect(recorded).toEqual([]);
  });
});
