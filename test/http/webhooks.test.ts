import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Webhook } from 'standardwebhooks';
import { sql } from 'kysely';
import { startTestApp, type TestApp } from '../helpers/test-app.ts';
import { startWebhookReceiver, verifyDelivery, type ReceivedWebhook, type WebhookReceiver } from '../helpers/webhook-receiver.ts';

let app: TestApp;
let receiver: WebhookReceiver;
let other: WebhookReceiver;
let ent: { token: string; ownerId: string };
let ent2: { token: string; ownerId: string };
let free: { token: string; ownerId: string };

const base = '/api/v1/enterprise/webhooks';
const payloads = (list: ReceivedWebhook[]) => list.map((r) => JSON.parse(r.body) as { id: string; type: string; timestamp: string; data: any });

async function makeEnterprise(prefix: string) {
  const owner = await app.signUp(prefix);
  await app.deps.database.db.updateTable('owners').set({ plan: 'enterprise' }).where('id', '=', owner.ownerId).execute();
  return owner;
}

/** The operations on one webhook, with a valid body each. */
const operationsOn = (id: string): Array<[string, string, unknown?]> => [
  ['GET', `${base}/${id}`],
  ['PATCH', `${base}/${id}`, { enabled: false }],
  ['DELETE', `${base}/${id}`],
  ['GET', `${base}/${id}/deliveries`],
  ['POST', `${base}/${id}/replay`, { deliveryId: id }],
  ['POST', `${base}/${id}/test`, {}],
  ['POST', `${base}/${id}/validate`, { url: receiver.url }],
  ['POST', `${base}/${id}/rotate-secret`, {}],
];

async function createHook(token: string, body: Record<string, unknown>) {
  const res = await app.request('POST', base, { token, body });
  expect(res.status, res.text).toBe(201);
  return res.body.data as { webhook: { id: string; url: string; events: string[] }; secret?: string };
}

/** Waits until `predicate` holds for the receiver's requests. */
async function until(r: WebhookReceiver, predicate: (list: ReceivedWebhook[]) => boolean, timeoutMs = 10_000) {
  const deadline = Date.now() + timeoutMs;
  while (!predicate(r.received)) {
    if (Date.now() > deadline)
      throw new Error(
        `timed out; received ${r.received.length}: ${payloads(r.received)
          .map((p) => p.type)
          .join(', ')}`,
      );
    await new Promise((res) => setTimeout(res, 20));
  }
  return r.received;
}

async function deliveries(token: string, hookId: string, query = '') {
  const res = await app.request('GET', `${base}/${hookId}/deliveries${query}`, { token });
  expect(res.status, res.text).toBe(200);
  return res.body.data as { deliveries: any[]; nextCursor: string | null; hasMore: boolean };
}

async function settled(token: string, hookId: string, deliveryId: string, timeoutMs = 10_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const found = (await deliveries(token, hookId, '?limit=100')).deliveries.find((d) => d.deliveryId === deliveryId);
    if (found && found.status !== 'pending') return found;
    if (Date.now() > deadline) throw new Error(`delivery ${deliveryId} still ${found?.status}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

beforeAll(async () => {
  receiver = await startWebhookReceiver();
  other = await startWebhookReceiver('/other');
  app = await startTestApp({ OUTBOUND_ALLOW_HOSTS: `${receiver.hostPort},${other.hostPort}`, RATE_LIMIT_DEFAULT: '1000', RATE_LIMIT_UPLOAD: '100' });
  ent = await makeEnterprise('wh-ent');
  ent2 = await makeEnterprise('wh-ent2');
  free = await app.signUp('wh-free');
});

afterAll(async () => {
  await app?.stop();
  await receiver?.close();
  await other?.close();
});

describe('access', () => {
  it('every webhook operation is 403 for a non-enterprise owner and 401 without a session', async () => {
    const ops: Array<[string, string, unknown?]> = [
      ['GET', base],
      ['POST', base, { url: receiver.url }],
      ...operationsOn('00000000-0000-4000-8000-000000000000'),
    ];
    for (const [method, path, body] of ops) {
      const forbidden = await app.request(method, path, { token: free.token, body });
      expect(forbidden.status, `${method} ${path}`).toBe(403);
      expect(forbidden.body).toMatchObject({ success: false, error: { code: 'FORBIDDEN' } });
      expect((await app.request(method, path, { body })).status, `${method} ${path}`).toBe(401);
    }
  });
});

describe('endpoint management', () => {
  it('creates with a generated secret shown once, never returned again', async () => {
    const created = await createHook(ent.token, { url: receiver.url, events: ['api_key.created'] });
    expect(created.secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(created.webhook).toMatchObject({ url: receiver.url, events: ['api_key.created'], enabled: true, disabledReason: null });
    const got = await app.request('GET', `${base}/${created.webhook.id}`, { token: ent.token });
    expect(got.status).toBe(200);
    expect(got.text).not.toContain(created.secret!.slice(6));
    expect(got.body.data.webhook.stats).toMatchObject({ deliveries: 0, successRate: null });
    const listed = await app.request('GET', base, { token: ent.token });
    expect(listed.text).not.toContain(created.secret!.slice(6));
    const stored = await app.deps.database.db.selectFrom('webhooks').select('secret_enc').where('id', '=', created.webhook.id).executeTakeFirstOrThrow();
    expect(stored.secret_enc).not.toContain(created.secret!.slice(6));
    await app.request('DELETE', `${base}/${created.webhook.id}`, { token: ent.token });
  });

  it('accepts an owner-supplied secret without echoing it; refuses short or malformed ones with 400', async () => {
    const secret = 'whsec_' + Buffer.alloc(24, 7).toString('base64');
    const created = await createHook(ent.token, { url: receiver.url, secret, events: ['*'] });
    expect(created.secret).toBeUndefined();
    await app.request('DELETE', `${base}/${created.webhook.id}`, { token: ent.token });
    for (const bad of ['whsec_' + Buffer.alloc(23, 1).toString('base64'), 'short', 'whsec_not base64!!']) {
      const res = await app.request('POST', base, { token: ent.token, body: { url: receiver.url, secret: bad } });
      expect(res.status, bad).toBe(400);
      expect(res.body.error.details).toMatch(/^secret/);
    }
  });

  it('refuses plain http (unless allow-listed), private addresses, unknown events and an empty event list', async () => {
    const cases: Array<[Record<string, unknown>, RegExp]> = [
      [{ url: 'http://example.com/hook' }, /url: must use https/],
      [{ url: 'https://127.0.0.1/hook' }, /url: .*not a public address/],
      [{ url: 'https://169.254.169.254/latest' }, /url: .*not a public address/],
      [{ url: 'https://[::ffff:10.0.0.1]/x' }, /url: .*not a public address/],
      [{ url: 'not a url' }, /url: not a valid absolute URL/],
      [{ url: receiver.url, events: ['document.exploded'] }, /events.*unknown event type 'document\.exploded'/],
      [{ url: receiver.url, events: [] }, /events/],
      [{}, /url/],
    ];
    for (const [body, details] of cases) {
      const res = await app.request('POST', base, { token: ent.token, body });
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body.error.details, JSON.stringify(body)).toMatch(details);
    }
  });

  it('update and validate refuse bad input with 400 naming the field', async () => {
    const hook = await createHook(ent.token, { url: receiver.url, events: ['*'] });
    const id = hook.webhook.id;
    const cases: Array<[string, string, unknown, RegExp]> = [
      ['PATCH', `${base}/${id}`, {}, /url/],
      ['PATCH', `${base}/${id}`, { url: 'http://example.com/hook' }, /url: must use https/],
      ['PATCH', `${base}/${id}`, { url: 'https://10.0.0.8/hook' }, /url: .*not a public address/],
      ['PATCH', `${base}/${id}`, { events: ['nope.never'] }, /events/],
      ['PATCH', `${base}/${id}`, { enabled: 'yes' }, /enabled/],
      ['POST', `${base}/${id}/validate`, { url: 42 }, /url/],
      ['POST', `${base}/${id}/replay`, { deliveryId: 42 }, /deliveryId/],
    ];
    for (const [method, path, body, details] of cases) {
      const res = await app.request(method, path, { token: ent.token, body });
      expect(res.status, `${method} ${JSON.stringify(body)}`).toBe(400);
      expect(res.body.error.details, `${method} ${JSON.stringify(body)}`).toMatch(details);
    }
    // Nothing was changed by the refused updates.
    expect((await app.request('GET', `${base}/${id}`, { token: ent.token })).body.data.webhook).toMatchObject({
      url: receiver.url,
      events: ['*'],
      enabled: true,
    });
    await app.request('DELETE', `${base}/${id}`, { token: ent.token });
  });

  it("another owner's webhook is a 404 for every operation", async () => {
    const mine = await createHook(ent.token, { url: receiver.url, events: ['knowledge_base.deleted'] });
    const id = mine.webhook.id;
    for (const [method, path, body] of operationsOn(id)) {
      expect((await app.request(method, path, { token: ent2.token, body })).status, `${method} ${path}`).toBe(404);
    }
    expect((await app.request('GET', base, { token: ent2.token })).body.data.webhooks.map((w: { id: string }) => w.id)).not.toContain(id);
    const patched = await app.request('PATCH', `${base}/${id}`, { token: ent.token, body: { events: ['*'], enabled: false } });
    expect(patched.body.data.webhook).toMatchObject({ events: ['*'], enabled: false, disabledReason: 'owner' });
    const enabled = await app.request('PATCH', `${base}/${id}`, { token: ent.token, body: { enabled: true } });
    expect(enabled.body.data.webhook).toMatchObject({ enabled: true, disabledReason: null, disabledAt: null });
    expect((await app.request('DELETE', `${base}/${id}`, { token: ent.token })).status).toBe(200);
    expect((await app.request('GET', `${base}/${id}`, { token: ent.token })).status).toBe(404);
  });
});

describe('events, signatures and delivery', () => {
  it('delivers the event catalogue, signed so that standardwebhooks verifies every delivery', async () => {
    receiver.received.length = 0;
    const hook = await createHook(ent.token, { url: receiver.url, events: ['*'] });
    const secret = hook.secret!;
    // Changes of every kind, by the owner.
    const kb = (await app.request('POST', '/api/v1/knowledge-base/configs', { token: ent.token, body: { name: 'Hooks KB' } })).body.data.config;
    await app.request('PATCH', `/api/v1/knowledge-base/configs/${kb.id}`, { token: ent.token, body: { name: 'Hooks KB 2' } });
    const ci = (await app.request('POST', '/api/v1/chat-interfaces', { token: ent.token, body: { name: 'Hooks chat', configId: kb.id } })).body.data
      .chatInterface;
    await app.request('PATCH', `/api/v1/chat-interfaces/${ci.id}`, { token: ent.token, body: { welcomeMessage: 'Hi' } });
    const key = (await app.request('POST', '/api/v1/api-keys', { token: ent.token, body: { name: 'k', chatInterfaceId: ci.id } })).body.data;
    await app.request('PATCH', `/api/v1/api-keys/${key.apiKey.id}`, { token: ent.token, body: { name: 'k2' } });
    const good = await app.upload('/api/v1/knowledge-base/documents', {
      token: ent.token,
      fileName: 'faq.txt',
      bytes: Buffer.from('Shipping takes three days.'),
      fields: { configId: kb.id },
    });
    expect(good.status, good.text).toBe(201);
    const bad = await app.upload('/api/v1/knowledge-base/documents', {
      token: ent.token,
      fileName: 'empty.md',
      bytes: Buffer.from('#\n\n'),
      fields: { configId: kb.id },
    });
    expect(bad.status, bad.text).toBe(201);
    const turn = await app.request('POST', `/api/v1/chat/${ci.slug}`, { token: key.key, body: { message: 'How long is shipping?' } });
    expect(turn.status, turn.text).toBe(200);
    await app.request('POST', '/api/v1/chat-messages', { token: ent.token, body: { sessionId: turn.body.sessionId, message: 'An operator here' } });
    await app.request('DELETE', `/api/v1/api-keys/${key.apiKey.id}`, { token: ent.token });
    // Both documents must be done before their knowledge base is deleted (a slow machine may still be parsing one).
    await until(receiver, (list) => ['document.failed', 'document.completed'].every((t) => payloads(list).some((p) => p.type === t)), 20_000);
    expect((await app.request('DELETE', `/api/v1/knowledge-base/documents/${bad.body.data.document.id}`, { token: ent.token })).status).toBe(200);
    await app.request('DELETE', `/api/v1/chat-interfaces/${ci.id}`, { token: ent.token });
    await app.request('DELETE', `/api/v1/knowledge-base/configs/${kb.id}`, { token: ent.token });

    const expected = [
      'knowledge_base.created',
      'knowledge_base.updated',
      'chat_interface.created',
      'chat_interface.updated',
      'api_key.created',
      'api_key.updated',
      'document.completed',
      'document.failed',
      'document.deleted',
      'chat_session.created',
      'chat_message.created',
      'api_key.deleted',
      'chat_interface.deleted',
      'knowledge_base.deleted',
    ];
    const got = await until(
      receiver,
      (list) => expected.every((t) => payloads(list).some((p) => p.type === t)) && payloads(list).filter((p) => p.type === 'chat_message.created').length >= 3,
    );
    for (const delivery of got) {
      const verified = verifyDelivery(secret, delivery) as { id: string; type: string };
      expect(verified.id).toBe(delivery.headers['webhook-id']);
      expect(delivery.headers['content-type']).toBe('application/json');
    }
    const byType = (t: string) => payloads(got).filter((p) => p.type === t);
    expect(byType('knowledge_base.updated')[0]!.data).toMatchObject({ id: kb.id, name: 'Hooks KB 2' });
    expect(byType('api_key.created')[0]!.data).toMatchObject({ id: key.apiKey.id, name: 'k' });
    expect(JSON.stringify(byType('api_key.created'))).not.toContain(key.key);
    expect(byType('document.completed')[0]!.data).toMatchObject({ fileName: 'faq.txt', status: 'completed' });
    expect(byType('document.failed')[0]!.data).toMatchObject({ fileName: 'empty.md', status: 'failed' });
    expect(byType('chat_session.created')[0]!.data).toEqual({ sessionId: turn.body.sessionId, chatInterfaceId: ci.id });
    // Deliveries run concurrently: receivers get no ordering guarantee (the timestamp and ids tell the order).
    expect(
      byType('chat_message.created')
        .map((p) => [p.data.role, p.data.content])
        .sort(),
    ).toEqual([
      ['assistant', turn.body.message],
      ['operator', 'An operator here'],
      ['user', 'How long is shipping?'],
    ]);
    expect(byType('chat_interface.deleted')[0]!.data).toEqual({ id: ci.id });
    expect(byType('document.deleted').map((p) => p.data)).toEqual([{ id: bad.body.data.document.id, configId: kb.id }]);
    // Ids are unique per event; timestamps are ISO.
    expect(new Set(got.map((r) => r.headers['webhook-id'])).size).toBe(got.length);
    for (const p of payloads(got)) expect(Number.isNaN(Date.parse(p.timestamp))).toBe(false);
    // Deleted while deliveries of it may still be running (this once deadlocked with them on PostgreSQL).
    expect((await app.request('DELETE', `${base}/${hook.webhook.id}`, { token: ent.token })).status).toBe(200);
  });

  it('standardwebhooks rejects a tampered body, a wrong secret and a 6-minute-old timestamp', async () => {
    receiver.received.length = 0;
    const hook = await createHook(ent.token, { url: receiver.url, events: ['webhook.test'] });
    const test = await app.request('POST', `${base}/${hook.webhook.id}/test`, { token: ent.token, body: {} });
    const [delivery] = await receiver.waitFor(1);
    expect(verifyDelivery(hook.secret!, delivery!)).toMatchObject({ type: 'webhook.test', data: { webhookId: hook.webhook.id } });
    expect(() => verifyDelivery(hook.secret!, { ...delivery!, body: delivery!.body.replace('test event', 'TEST event') })).toThrow(/signature/i);
    expect(() => verifyDelivery('whsec_' + Buffer.alloc(32, 9).toString('base64'), delivery!)).toThrow(/signature/i);
    // Re-signed correctly but six minutes old: the timestamp tolerance (5 min) must refuse it.
    const old = new Date(Date.now() - 6 * 60_000);
    const stale = { webhook: new Webhook(hook.secret!) };
    const headers = {
      'webhook-id': String(delivery!.headers['webhook-id']),
      'webhook-timestamp': String(Math.floor(old.getTime() / 1000)),
      'webhook-signature': stale.webhook.sign(String(delivery!.headers['webhook-id']), old, delivery!.body),
    };
    expect(() => stale.webhook.verify(delivery!.body, headers)).toThrow(/too old/i);
    expect(test.body).toEqual({ success: true, message: expect.any(String), deliveryId: expect.any(String) });
    const settledDelivery = await settled(ent.token, hook.webhook.id, test.body.deliveryId);
    expect(settledDelivery).toMatchObject({ status: 'succeeded', eventType: 'webhook.test', attemptCount: 1, lastHttpStatus: 200 });
    expect(settledDelivery.attempts[0]).toMatchObject({ trigger: 'automatic', httpStatus: 200, responseExcerpt: 'ok', error: null });
    await app.request('DELETE', `${base}/${hook.webhook.id}`, { token: ent.token });
  });

  it('filters by subscription, across endpoints and owners', async () => {
    receiver.received.length = 0;
    other.received.length = 0;
    const onlyKeys = await createHook(ent.token, { url: receiver.url, events: ['api_key.deleted'] });
    const everything = await createHook(ent.token, { url: other.url });
    expect(everything.webhook.events).toEqual(['*']);
    const foreign = await createHook(ent2.token, { url: other.url.replace('/other', '/foreign'), events: ['*'] });
    const kb = (await app.request('POST', '/api/v1/knowledge-base/configs', { token: ent.token, body: { name: 'Filter KB' } })).body.data.config;
    await until(other, (list) => payloads(list).some((p) => p.type === 'knowledge_base.created' && p.data.id === kb.id));
    await new Promise((r) => setTimeout(r, 300));
    // (A late retry of an earlier test's event may arrive: at-least-once. Only this test's event counts.)
    expect(payloads(receiver.received).filter((p) => p.data?.id === kb.id)).toEqual([]);
    expect(other.received.filter((r) => r.headers['webhook-id'] && payloads([r])[0]!.data.id === kb.id)).toHaveLength(1);
    // ent2's endpoint never saw ent's event.
    expect(other.received.every((r) => !r.body.includes(foreign.webhook.id))).toBe(true);
    for (const h of [onlyKeys, everything]) await app.request('DELETE', `${base}/${h.webhook.id}`, { token: ent.token });
    await app.request('DELETE', `${base}/${foreign.webhook.id}`, { token: ent2.token });
  });

  // jsonb refuses NUL and half a surrogate pair: such a record failed, and the delivery stayed pending.
  it("stores a receiver's answer holding NUL, or a character cut at the excerpt's end, as text it can keep", async () => {
    receiver.reply = () => ({ status: 500, body: `${'a'.repeat(499)}\u{1F600}b\u0000c` });
    const hook = await createHook(ent.token, { url: receiver.url, events: ['webhook.test'] });
    const cut = await app.request('POST', `${base}/${hook.webhook.id}/test`, { token: ent.token, body: {} });
    expect((await settled(ent.token, hook.webhook.id, cut.body.deliveryId)).attempts[0]).toMatchObject({ httpStatus: 500, responseExcerpt: 'a'.repeat(499) });
    receiver.reply = () => ({ status: 500, body: 'before\u0000after' });
    const nul = await app.request('POST', `${base}/${hook.webhook.id}/test`, { token: ent.token, body: {} });
    expect((await settled(ent.token, hook.webhook.id, nul.body.deliveryId)).attempts[0]).toMatchObject({ httpStatus: 500, responseExcerpt: 'beforeafter' });
    receiver.reply = () => ({});
    await app.request('DELETE', `${base}/${hook.webhook.id}`, { token: ent.token });
  });

  it('replays a failed delivery with the same webhook-id; succeeded ones are a 409; another owner is a 404', async () => {
    receiver.received.length = 0;
    receiver.reply = () => ({ status: 500, body: 'boom' });
    const hook = await createHook(ent.token, { url: receiver.url, events: ['webhook.test'] });
    const test = await app.request('POST', `${base}/${hook.webhook.id}/test`, { token: ent.token, body: {} });
    const failed = await settled(ent.token, hook.webhook.id, test.body.deliveryId);
    expect(failed).toMatchObject({ status: 'failed', attemptCount: 1, lastHttpStatus: 500 });
    expect(failed.attempts[0]).toMatchObject({ httpStatus: 500, responseExcerpt: 'boom', error: 'Receiver answered 500' });
    expect(Date.parse(failed.nextAttemptAt) - Date.parse(failed.attempts[0].at)).toBeGreaterThanOrEqual(4_500);

    expect((await app.request('POST', `${base}/${hook.webhook.id}/replay`, { token: ent2.token, body: { deliveryId: test.body.deliveryId } })).status).toBe(
      404,
    );
    receiver.reply = () => ({});
    const replay = await app.request('POST', `${base}/${hook.webhook.id}/replay`, { token: ent.token, body: { deliveryId: test.body.deliveryId } });
    expect(replay.status, replay.text).toBe(200);
    expect(replay.body.data).toMatchObject({ deliveryId: test.body.deliveryId, replayQueued: true });
    await receiver.waitFor(2);
    const ids = receiver.received.map((r) => r.headers['webhook-id']);
    expect(ids[1]).toBe(ids[0]);
    expect(receiver.received[1]!.body).toBe(receiver.received[0]!.body);
    const done = await (async () => {
      for (let i = 0; i < 200; i++) {
        const d = (await deliveries(ent.token, hook.webhook.id)).deliveries[0];
        if (d.status === 'succeeded') return d;
        await new Promise((r) => setTimeout(r, 25));
      }
      throw new Error('replay never succeeded');
    })();
    expect(done.attempts.map((a: { trigger: string }) => a.trigger)).toEqual(['automatic', 'replay']);
    const again = await app.request('POST', `${base}/${hook.webhook.id}/replay`, { token: ent.token, body: { deliveryId: test.body.deliveryId } });
    expect(again.status).toBe(409);
    expect(
      (await app.request('POST', `${base}/${hook.webhook.id}/replay`, { token: ent.token, body: { deliveryId: '00000000-0000-4000-8000-000000000000' } }))
        .status,
    ).toBe(404);
    expect((await app.request('POST', `${base}/${hook.webhook.id}/replay`, { token: ent.token, body: {} })).status).toBe(400);
    await app.request('DELETE', `${base}/${hook.webhook.id}`, { token: ent.token });
  });

  it('pages the delivery history newest first', async () => {
    const hook = await createHook(ent.token, { url: receiver.url, events: ['webhook.test'] });
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await app.request('POST', `${base}/${hook.webhook.id}/test`, { token: ent.token, body: {} })).body.deliveryId);
    const first = await deliveries(ent.token, hook.webhook.id, '?limit=2');
    expect(first.deliveries.map((d) => d.deliveryId)).toEqual([ids[4], ids[3]]);
    expect(first.hasMore).toBe(true);
    const second = await deliveries(ent.token, hook.webhook.id, `?limit=2&cursor=${first.nextCursor}`);
    expect(second.deliveries.map((d) => d.deliveryId)).toEqual([ids[2], ids[1]]);
    const third = await deliveries(ent.token, hook.webhook.id, `?limit=2&cursor=${second.nextCursor}`);
    expect(third.deliveries.map((d) => d.deliveryId)).toEqual([ids[0]]);
    expect(third).toMatchObject({ hasMore: false, nextCursor: null });
    // Deliveries created within one millisecond (one event to many endpoints does that) are all paged through.
    const { rows: burst } = await sql<{ id: string }>`
      with ev as (insert into webhook_events (id, owner_id, type, body) select gen_random_uuid(), ${ent.ownerId}::uuid, 'webhook.test', '{}' from generate_series(1, 6) returning id)
      insert into webhook_deliveries (id, webhook_id, event_id, owner_id, status) select gen_random_uuid(), ${hook.webhook.id}::uuid, ev.id, ${ent.ownerId}::uuid, 'succeeded' from ev returning id`.execute(
      app.deps.database.db,
    );
    const seen: string[] = [];
    let cursor = '';
    for (let page = 0; page < 20; page++) {
      const got = await deliveries(ent.token, hook.webhook.id, `?limit=1&status=succeeded${cursor ? `&cursor=${cursor}` : ''}`);
      seen.push(...got.deliveries.map((d) => d.deliveryId));
      if (!got.nextCursor) break;
      cursor = got.nextCursor;
    }
    expect(seen.filter((id) => burst.some((b) => b.id === id)).sort()).toEqual(burst.map((b) => b.id).sort());
    expect(new Set(seen).size).toBe(seen.length);
    expect((await app.request('GET', `${base}/${hook.webhook.id}/deliveries?cursor=garbage`, { token: ent.token })).status).toBe(400);
    for (const year of ['-200000-01-01T00:00:00.000Z', '+200000-01-01T00:00:00.000Z']) {
      const crafted = Buffer.from(JSON.stringify([year, ids[0]])).toString('base64url');
      expect((await app.request('GET', `${base}/${hook.webhook.id}/deliveries?cursor=${crafted}`, { token: ent.token })).status, year).toBe(400);
    }
    expect((await app.request('GET', `${base}/${hook.webhook.id}/deliveries?limit=1000`, { token: ent.token })).status).toBe(400);
    await app.request('DELETE', `${base}/${hook.webhook.id}`, { token: ent.token });
  });
});

describe('validate and rotate-secret', () => {
  it('validate reports acceptability and reachability without sending an event', async () => {
    receiver.received.length = 0;
    const hook = await createHook(ent.token, { url: receiver.url, events: ['*'] });
    const ok = await app.request('POST', `${base}/${hook.webhook.id}/validate`, { token: ent.token, body: {} });
    expect(ok.body).toEqual({ success: true, valid: true, message: expect.stringMatching(/Reachable/) });
    const closed = await app.request('POST', `${base}/${hook.webhook.id}/validate`, { token: ent.token, body: { url: receiver.url.replace(/:\d+\//, ':1/') } });
    expect(closed.body).toMatchObject({ success: true, valid: false });
    const privateUrl = await app.request('POST', `${base}/${hook.webhook.id}/validate`, { token: ent.token, body: { url: 'https://10.1.2.3/hook' } });
    expect(privateUrl.body).toMatchObject({ success: true, valid: false, message: expect.stringMatching(/not acceptable/) });
    const plain = await app.request('POST', `${base}/${hook.webhook.id}/validate`, { token: ent.token, body: { url: 'http://example.com/hook' } });
    expect(plain.body).toMatchObject({ valid: false, message: expect.stringMatching(/https/) });
    expect(receiver.received).toHaveLength(0);
    await app.request('DELETE', `${base}/${hook.webhook.id}`, { token: ent.token });
  });

  it('rotate-secret shows the new secret once; during the grace period both secrets verify', async () => {
    receiver.received.length = 0;
    const hook = await createHook(ent.token, { url: receiver.url, events: ['webhook.test'] });
    const rotated = await app.request('POST', `${base}/${hook.webhook.id}/rotate-secret`, { token: ent.token, body: {} });
    expect(rotated.status).toBe(200);
    expect(rotated.body).toMatchObject({ success: true, secret: expect.stringMatching(/^whsec_/), message: expect.any(String) });
    const newSecret = rotated.body.secret as string;
    expect(newSecret).not.toBe(hook.secret);
    const got = await app.request('GET', `${base}/${hook.webhook.id}`, { token: ent.token });
    expect(got.text).not.toContain(newSecret.slice(6));
    expect(Date.parse(got.body.data.webhook.secretRotationGraceUntil) - Date.now()).toBeGreaterThan(23 * 3_600_000);
    await app.request('POST', `${base}/${hook.webhook.id}/test`, { token: ent.token, body: {} });
    const [delivery] = await receiver.waitFor(1);
    expect(String(delivery!.headers['webhook-signature']).split(' ')).toHaveLength(2);
    expect(verifyDelivery(newSecret, delivery!)).toMatchObject({ type: 'webhook.test' });
    expect(verifyDelivery(hook.secret!, delivery!)).toMatchObject({ type: 'webhook.test' });
    await app.request('DELETE', `${base}/${hook.webhook.id}`, { token: ent.token });
  });
});

describe('GraphQL and OpenAPI', () => {
  it('GraphQL lists webhooks with delivery statistics; a non-enterprise owner gets FORBIDDEN', async () => {
    receiver.received.length = 0;
    let calls = 0;
    receiver.reply = () => (++calls === 1 ? { status: 503 } : {});
    const hook = await createHook(ent.token, { url: receiver.url, events: ['webhook.test'] });
    const first = await app.request('POST', `${base}/${hook.webhook.id}/test`, { token: ent.token, body: {} });
    await settled(ent.token, hook.webhook.id, first.body.deliveryId);
    const second = await app.request('POST', `${base}/${hook.webhook.id}/test`, { token: ent.token, body: {} });
    await settled(ent.token, hook.webhook.id, second.body.deliveryId);
    receiver.reply = () => ({});
    const query = `{ webhooks { id url events enabled stats { deliveries succeeded failed pending successRate lastFailureAt lastFailureStatus lastSuccessAt } recentDeliveries(limit: 5) { deliveryId eventType status lastHttpStatus } } }`;
    const res = await app.request('POST', '/graphql', { token: ent.token, body: { query } });
    expect(res.status, res.text).toBe(200);
    const found = res.body.data.webhooks.find((w: { id: string }) => w.id === hook.webhook.id);
    expect(found.stats).toMatchObject({ deliveries: 2, succeeded: 1, failed: 1, pending: 0, successRate: 0.5, lastFailureStatus: 503 });
    expect(Date.parse(found.stats.lastFailureAt)).not.toBeNaN();
    expect(found.recentDeliveries.map((d: { deliveryId: string; status: string }) => [d.deliveryId, d.status])).toEqual([
      [second.body.deliveryId, 'succeeded'],
      [first.body.deliveryId, 'failed'],
    ]);
    expect(JSON.stringify(res.body)).not.toContain('whsec_');
    const denied = await app.request('POST', '/graphql', { token: free.token, body: { query: '{ webhooks { id } }' } });
    expect(denied.body.errors[0].extensions.code).toBe('FORBIDDEN');
    await app.request('DELETE', `${base}/${hook.webhook.id}`, { token: ent.token });
  });

  it('the OpenAPI document has the eight webhook operations and every event payload under `webhooks`', async () => {
    const doc = (await app.request('GET', '/api/v1/openapi.json')).body;
    for (const [path, methods] of Object.entries({
      [base]: ['get', 'post'],
      [`${base}/{webhookId}`]: ['get', 'patch', 'delete'],
      [`${base}/{webhookId}/deliveries`]: ['get'],
      [`${base}/{webhookId}/replay`]: ['post'],
      [`${base}/{webhookId}/test`]: ['post'],
      [`${base}/{webhookId}/validate`]: ['post'],
      [`${base}/{webhookId}/rotate-secret`]: ['post'],
    })) {
      for (const m of methods) expect(doc.paths[path]?.[m]?.['x-auth'], `${m} ${path}`).toBe('E');
    }
    const { WEBHOOK_EVENT_TYPES } = await import('../../schema/webhooks.ts');
    expect(Object.keys(doc.webhooks).sort()).toEqual([...WEBHOOK_EVENT_TYPES].sort());
    const completed = doc.webhooks['document.completed'].post;
    expect(completed.parameters.map((p: { name: string }) => p.name)).toEqual(['webhook-id', 'webhook-timestamp', 'webhook-signature']);
    const payload = completed.requestBody.content['application/json'].schema;
    expect(payload.properties.type).toEqual({ const: 'document.completed' });
    expect(payload.properties.data.$ref).toBe('#/components/schemas/KnowledgeBaseDocument');
    expect(doc.components.schemas.KnowledgeBaseDocument.properties.fileName).toBeDefined();
    expect(doc.webhooks['chat_message.created'].post.requestBody.content['application/json'].schema.properties.data.properties.role.enum).toEqual([
      'user',
      'assistant',
      'operator',
    ]);
    expect(JSON.stringify(doc)).not.toContain('#/$defs/');
  });
});

describe('orphan sweep', () => {
  it('gives a delivery that lost its job a new one, and ends one whose job died', async () => {
    const { sweepOrphanedDeliveries } = await import('../../routers/webhooks/sweeper.ts');
    const db = app.deps.database.db;
    receiver.reply = () => ({ status: 500 });
    const hook = await createHook(ent.token, { url: receiver.url, events: ['webhook.test'] });
    const lost = (await app.request('POST', `${base}/${hook.webhook.id}/test`, { token: ent.token, body: {} })).body.deliveryId as string;
    const died = (await app.request('POST', `${base}/${hook.webhook.id}/test`, { token: ent.token, body: {} })).body.deliveryId as string;
    await settled(ent.token, hook.webhook.id, lost);
    await settled(ent.token, hook.webhook.id, died);
    receiver.reply = () => ({});
    // Both are `failed` with a retry scheduled in ~5 s; take their jobs away (one deleted, one dead).
    await db.deleteFrom('jobs').where('dedupe_key', '=', `webhook:${lost}`).execute();
    await db.updateTable('jobs').set({ status: 'dead', last_error: 'handler crashed' }).where('dedupe_key', '=', `webhook:${died}`).execute();
    await sql`update webhook_deliveries set created_at = now() - interval '1 minute' where id in (${lost}::uuid, ${died}::uuid)`.execute(db);
    expect(await sweepOrphanedDeliveries(db, app.deps.webhookJobs)).toBe(2);
    // The running workers may already hold it (and put it back until its attempt is due).
    const requeued = await db
      .selectFrom('jobs')
      .select(['kind'])
      .where('dedupe_key', '=', `webhook:${lost}`)
      .where('status', 'in', ['queued', 'running'])
      .execute();
    expect(requeued).toEqual([{ kind: 'webhook.deliver' }]);
    const ended = (await deliveries(ent.token, hook.webhook.id)).deliveries.find((d) => d.deliveryId === died);
    expect(ended).toMatchObject({ status: 'failed', nextAttemptAt: null });
    expect(ended.attempts.at(-1).error).toMatch(/internal errors: handler crashed/);
    // Nothing left to sweep.
    expect(await sweepOrphanedDeliveries(db, app.deps.webhookJobs)).toBe(0);
    await app.request('DELETE', `${base}/${hook.webhook.id}`, { token: ent.token });
  });
});

describe('outcomes and plans', () => {
  it('a delivery that succeeded stays succeeded whatever an overlapping attempt reports later', async () => {
    const { saveAttempt } = await import('../../routers/webhooks/repository.ts');
    const db = app.deps.database.db;
    const hook = await createHook(ent.token, { url: receiver.url, events: ['webhook.test'] });
    const test = await app.request('POST', `${base}/${hook.webhook.id}/test`, { token: ent.token, body: {} });
    const id = test.body.deliveryId as string;
    await settled(ent.token, hook.webhook.id, id);
    const attempt = (httpStatus: number) => ({
      at: new Date().toISOString(),
      trigger: 'automatic' as const,
      httpStatus,
      latencyMs: 1,
      responseExcerpt: null,
      error: httpStatus === 200 ? null : 'x',
    });
    // The automatic attempt fails after a replay succeeded: the failure is recorded, the outcome is not.
    expect(
      await saveAttempt(db, id, { status: 'failed', countsAsAutomatic: true, nextAttemptAt: new Date(Date.now() + 5_000), attempt: attempt(500) }),
    ).toEqual({ status: 'succeeded', next_attempt_at: null });
    // A failed replay changes nothing but pending -> failed.
    await db.updateTable('webhook_deliveries').set({ status: 'exhausted' }).where('id', '=', id).execute();
    expect(await saveAttempt(db, id, { status: 'keep', countsAsAutomatic: false, nextAttemptAt: null, attempt: attempt(500) })).toEqual({
      status: 'exhausted',
      next_attempt_at: null,
    });
    const next = new Date(Date.now() + 60_000);
    await db.updateTable('webhook_deliveries').set({ status: 'failed', next_attempt_at: next }).where('id', '=', id).execute();
    expect(await saveAttempt(db, id, { status: 'keep', countsAsAutomatic: false, nextAttemptAt: null, attempt: attempt(503) })).toEqual({
      status: 'failed',
      next_attempt_at: next,
    });
    const row = (await deliveries(ent.token, hook.webhook.id)).deliveries.find((d) => d.deliveryId === id);
    expect(row.attempts.map((a: { httpStatus: number }) => a.httpStatus)).toEqual([200, 500, 500, 503]);
    await app.request('DELETE', `${base}/${hook.webhook.id}`, { token: ent.token });
  });

  it('an owner no longer on the enterprise plan receives nothing until the plan is back', async () => {
    receiver.received.length = 0;
    const owner = await makeEnterprise('wh-downgrade');
    const hook = await createHook(owner.token, { url: receiver.url, events: ['knowledge_base.created'] });
    const setPlan = (plan: 'free' | 'enterprise') => app.setOwner(owner.ownerId, { plan });
    await setPlan('free');
    const quiet = (await app.request('POST', '/api/v1/knowledge-base/configs', { token: owner.token, body: { name: 'while free' } })).body.data.config;
    await setPlan('enterprise');
    const heard = (await app.request('POST', '/api/v1/knowledge-base/configs', { token: owner.token, body: { name: 'enterprise again' } })).body.data.config;
    await until(receiver, (list) => payloads(list).some((p) => p.data.id === heard.id));
    await new Promise((r) => setTimeout(r, 200));
    expect(payloads(receiver.received).some((p) => p.data.id === quiet.id)).toBe(false);
    await app.request('DELETE', `${base}/${hook.webhook.id}`, { token: owner.token });
  });

  it('tool changes and avatar uploads are updates too', async () => {
    receiver.received.length = 0;
    const hook = await createHook(ent.token, { url: receiver.url, events: ['knowledge_base.updated', 'chat_interface.updated'] });
    const kb = (await app.request('POST', '/api/v1/knowledge-base/configs', { token: ent.token, body: { name: 'Tools KB' } })).body.data.config;
    const tools = await app.request('PATCH', `/api/v1/knowledge-base/configs/${kb.id}/tools`, {
      token: ent.token,
      body: { tools: [{ name: 'lead_capture', enabled: true }] },
    });
    expect(tools.status, tools.text).toBe(200);
    const ci = (await app.request('POST', '/api/v1/chat-interfaces', { token: ent.token, body: { name: 'Avatar chat' } })).body.data.chatInterface;
    const { default: sharp } = await import('sharp');
    const png = await sharp({ create: { width: 8, height: 8, channels: 3, background: '#336699' } })
      .png()
      .toBuffer();
    const avatar = await app.upload(`/api/v1/chat-interfaces/${ci.id}/avatar`, { token: ent.token, fileName: 'a.png', contentType: 'image/png', bytes: png });
    expect(avatar.status, avatar.text).toBe(200);
    const got = await until(
      receiver,
      (list) =>
        payloads(list).some((p) => p.type === 'chat_interface.updated' && p.data.id === ci.id) &&
        payloads(list).some((p) => p.type === 'knowledge_base.updated' && p.data.id === kb.id),
    );
    const kbUpdate = payloads(got).find((p) => p.type === 'knowledge_base.updated' && p.data.id === kb.id)!;
    expect(kbUpdate.data.tools[0]).toMatchObject({ name: 'lead_capture', enabled: true });
    expect(payloads(got).find((p) => p.type === 'chat_interface.updated')!.data.avatarUrl).toEqual(expect.any(String));
    await app.request('DELETE', `${base}/${hook.webhook.id}`, { token: ent.token });
  });
});
