// Enterprise webhooks shared fairly among owners: the delivery workers are per instance, and an owner whose endpoint
// answers only at the deadline must not hold all of them while other owners' events wait behind its backlog (an
// attack pass saw another owner's event wait 75 s behind 41 events to a hanging endpoint). The app runs its real
// delivery workers (4, so at most 3 per owner by default) against real local receivers.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { webhookFairKey } from '../../routers/webhooks/outbox-repository.ts';
import { startTestApp, type TestApp } from '../helpers/test-app.ts';
import { startWebhookReceiver, verifyDelivery, type WebhookReceiver } from '../helpers/webhook-receiver.ts';

const base = '/api/v1/enterprise/webhooks';
/** Longer than any wait below: an attempt to the hanging receiver lasts the whole test. */
const TIMEOUT_MS = 60_000;

let app: TestApp;
let hanging: WebhookReceiver;
let healthy: WebhookReceiver;

async function enterpriseOwner(prefix: string) {
  const owner = await app.signUp(prefix);
  await app.setOwner(owner.ownerId, { plan: 'enterprise' });
  return owner;
}

async function createHook(token: string, url: string) {
  const res = await app.request('POST', base, { token, body: { url, events: ['knowledge_base.created'] } });
  expect(res.status, res.text).toBe(201);
  return res.body.data as { webhook: { id: string }; secret: string };
}

async function createKnowledgeBase(token: string, name: string) {
  const res = await app.request('POST', '/api/v1/knowledge-base/configs', { token, body: { name } });
  expect(res.status, res.text).toBe(201);
}

beforeAll(async () => {
  hanging = await startWebhookReceiver('/slow');
  hanging.reply = () => ({ delayMs: 2 * TIMEOUT_MS });
  healthy = await startWebhookReceiver('/fast');
  app = await startTestApp({
    OUTBOUND_ALLOW_HOSTS: `${hanging.hostPort},${healthy.hostPort}`,
    RATE_LIMIT_DEFAULT: '1000',
    WEBHOOK_CONCURRENCY: '4',
    WEBHOOK_TIMEOUT_MS: String(TIMEOUT_MS),
  });
});

afterAll(async () => {
  await hanging?.close();
  await healthy?.close();
  await app?.stop();
});

describe('delivery workers shared among owners', () => {
  it("an owner's hanging endpoint holds at most three of the four workers; another owner's event is delivered at once", async () => {
    const slow = await enterpriseOwner('wh-fair-slow');
    const fast = await enterpriseOwner('wh-fair-fast');
    await createHook(slow.token, hanging.url);
    const fastHook = await createHook(fast.token, healthy.url);

    for (let i = 0; i < 10; i++) await createKnowledgeBase(slow.token, `backlog ${i}`);
    await hanging.waitFor(3, 10_000);
    await new Promise((resolve) => setTimeout(resolve, 500)); // time enough for the fourth worker to be taken
    expect(hanging.received).toHaveLength(3);
    expect(hanging.mostOpen).toBe(3);

    const before = Date.now();
    await createKnowledgeBase(fast.token, 'not queued behind the backlog');
    const [delivered] = await healthy.waitFor(1, 5_000);
    expect(delivered!.receivedAt - before).toBeLessThan(5_000);
    expect(verifyDelivery(fastHook.secret, delivered!)).toMatchObject({ type: 'knowledge_base.created' });

    // The backlog is waiting, not lost: its other seven deliveries are still queued.
    const waiting = await app.deps.database.db
      .selectFrom('jobs')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('kind', '=', 'webhook.deliver')
      .where('status', '=', 'queued')
      .where('fair_key', '=', webhookFairKey(slow.ownerId))
      .executeTakeFirstOrThrow();
    expect(Number(waiting.n)).toBe(7);
  });
});
