import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/test-app.ts';
import { startWebhookReceiver, verifyDelivery, type WebhookReceiver } from '../helpers/webhook-receiver.ts';

/**
 * Leads, through the real listener: a visitor asks to be contacted, gets the lead-capture form, submits it; the
 * owner lists the leads (paginated, per interface), another owner sees none (and filtering by an interface that is
 * not theirs is a 404), and bad submissions are refused naming the field.
 */

let app: TestApp;
let receiver: WebhookReceiver;
let a: { token: string; ownerId: string };
let b: { token: string; ownerId: string };
let withForm: { id: string; slug: string };
let withoutForm: { id: string; slug: string };

async function makeInterface(token: string, name: string, configId: string) {
  const res = await app.request('POST', '/api/v1/chat-interfaces', { token, body: { name, configId, public: true } });
  expect(res.status, res.text).toBe(201);
  return { id: res.body.data.chatInterface.id as string, slug: res.body.data.chatInterface.slug as string };
}

async function visitorToken(slug: string) {
  const res = await app.request('POST', `/api/v1/chat/${slug}/visitor-sessions`, { body: {} });
  expect(res.status).toBe(201);
  return res.body.data.token as string;
}

const submit = (slug: string, token: string, body: Record<string, unknown>) => app.request('POST', `/api/v1/chat/${slug}/leads`, { token, body });

beforeAll(async () => {
  receiver = await startWebhookReceiver();
  app = await startTestApp({ OUTBOUND_ALLOW_HOSTS: receiver.hostPort });
  a = await app.signUp('leads-a');
  b = await app.signUp('leads-b');
  const kb = (await app.request('POST', '/api/v1/knowledge-base/configs', { token: a.token, body: { name: 'Sales' } })).body.data.config.id;
  const tools = await app.request('PATCH', `/api/v1/knowledge-base/configs/${kb}/tools`, {
    token: a.token,
    body: { tools: [{ name: 'lead_capture', enabled: true }] },
  });
  expect(tools.status, tools.text).toBe(200);
  const plainKb = (await app.request('POST', '/api/v1/knowledge-base/configs', { token: a.token, body: { name: 'No form' } })).body.data.config.id;
  withForm = await makeInterface(a.token, 'Sales chat', kb);
  withoutForm = await makeInterface(a.token, 'Plain chat', plainKb);
});
afterAll(async () => {
  await app?.stop();
  await receiver?.close();
});

describe('leads', () => {
  it('a visitor who asks to be contacted gets the form, submits it, and the owner finds the lead', async () => {
    const token = await visitorToken(withForm.slug);
    const chat = await app.request('POST', `/api/v1/chat/${withForm.slug}/visitor-messages`, {
      token,
      body: { message: 'Can someone contact me? Please call me back.' },
    });
    expect(chat.status, chat.text).toBe(200);
    expect(chat.body.toolCalls[0].name).toBe('lead_capture');
    expect(chat.body.formConfig.fields.map((f: { name: string }) => f.name)).toEqual(['name', 'email', 'phone']);

    const created = await submit(withForm.slug, token, { sessionId: chat.body.sessionId, fields: { name: 'Ada Lovelace', email: 'ada@example.com' } });
    expect(created.status, created.text).toBe(201);
    expect(created.body.data.lead).toMatchObject({ id: expect.any(String), createdAt: expect.any(String) });

    const listed = await app.request('GET', `/api/v1/leads?chatInterfaceId=${withForm.id}`, { token: a.token });
    expect(listed.status).toBe(200);
    expect(listed.body.data.leads[0]).toMatchObject({
      id: created.body.data.lead.id,
      chatInterfaceId: withForm.id,
      sessionId: chat.body.sessionId,
      fields: { name: 'Ada Lovelace', email: 'ada@example.com' },
    });
    expect((await app.request('GET', '/api/v1/leads', { token: b.token })).body.data.leads).toEqual([]);
    for (const id of [withForm.id, '7a1b2c3d-0000-4000-8000-000000000000', 'not-an-id']) {
      const foreign = await app.request('GET', `/api/v1/leads?chatInterfaceId=${id}`, { token: b.token });
      expect(foreign.status, id).toBe(404);
      expect(foreign.body.error.message).toBe('Chat interface not found');
    }
  });

  it('fields named after Object.prototype members (constructor, toString, valueOf) are fields like any other', async () => {
    const kb = (await app.request('POST', '/api/v1/knowledge-base/configs', { token: b.token, body: { name: 'Prototype names' } })).body.data.config.id;
    const fields = [
      { name: 'email', label: 'Email', type: 'email', required: true },
      { name: 'constructor', label: 'Company', type: 'text' },
      { name: 'toString', label: 'Role', type: 'text' },
      { name: 'valueOf', label: 'Budget', type: 'text', required: true },
    ];
    const tools = await app.request('PATCH', `/api/v1/knowledge-base/configs/${kb}/tools`, {
      token: b.token,
      body: { tools: [{ name: 'lead_capture', enabled: true, config: { fields } }] },
    });
    expect(tools.status, tools.text).toBe(200);
    // Owner b's, so owner a's lead counts in the other tests stay as they are.
    const iface = await makeInterface(b.token, 'Prototype chat', kb);
    const token = await visitorToken(iface.slug);

    const missing = await submit(iface.slug, token, { fields: { email: 'ada@example.com' } });
    expect(missing.status, missing.text).toBe(400);
    expect(missing.body.error.details).toContain('fields.valueOf: required');
    const created = await submit(iface.slug, token, { fields: { email: 'ada@example.com', valueOf: '10k' } });
    expect(created.status, created.text).toBe(201);
    const full = await submit(iface.slug, token, { fields: { email: 'grace@example.com', constructor: 'ACME', toString: 'CTO', valueOf: '20k' } });
    expect(full.status, full.text).toBe(201);

    const listed = await app.request('GET', `/api/v1/leads?chatInterfaceId=${iface.id}`, { token: b.token });
    const stored: Array<Record<string, string>> = [
      { email: 'grace@example.com', constructor: 'ACME', toString: 'CTO', valueOf: '20k' },
      { email: 'ada@example.com', valueOf: '10k' },
    ];
    expect(listed.body.data.leads.map((l: { fields: unknown }) => l.fields)).toEqual(stored);
  });

  it('refuses bad submissions naming the field; a form-less interface 403; a session of another visitor 404', async () => {
    const token = await visitorToken(withForm.slug);
    const bad = async (fields: Record<string, unknown>, details: string) => {
      const res = await submit(withForm.slug, token, { fields });
      expect(res.status, JSON.stringify(fields)).toBe(400);
      expect(res.body.error.details).toContain(details);
    };
    await bad({ name: 'Ada', email: 'nope' }, 'fields.email');
    await bad({ email: 'ada@example.com' }, 'fields.name');
    await bad({ name: 'Ada', email: 'ada@example.com', salary: '1' }, 'fields.salary');
    await bad({ name: 'Ada', email: 'ada@example.com', phone: 'never' }, 'fields.phone');
    await bad({ name: 42, email: 'ada@example.com' }, 'fields.name');

    expect((await submit(withoutForm.slug, await visitorToken(withoutForm.slug), { fields: { name: 'Ada' } })).status).toBe(403);
    const someoneElse = await visitorToken(withForm.slug);
    const theirs = await app.request('POST', `/api/v1/chat/${withForm.slug}/visitor-messages`, { token: someoneElse, body: { message: 'hello' } });
    expect((await submit(withForm.slug, token, { sessionId: theirs.body.sessionId, fields: { name: 'Ada', email: 'ada@example.com' } })).status).toBe(404);
    expect((await submit(withForm.slug, await visitorToken(withoutForm.slug), { fields: { name: 'Ada', email: 'ada@example.com' } })).status).toBe(403);
    expect((await app.request('POST', `/api/v1/chat/${withForm.slug}/leads`, { body: { fields: { name: 'Ada' } } })).status).toBe(401);
  });

  it('pages newest first without repeats; a crafted cursor is a 400', async () => {
    const token = await visitorToken(withForm.slug);
    for (let i = 0; i < 5; i++) {
      expect((await submit(withForm.slug, token, { fields: { name: `Lead ${i}`, email: `lead${i}@example.com` } })).status).toBe(201);
    }
    const seen: string[] = [];
    let cursor: string | null = null;
    const sizes: number[] = [];
    do {
      const page: { status: number; body: any } = await app.request('GET', `/api/v1/leads?limit=2${cursor ? `&cursor=${cursor}` : ''}`, { token: a.token });
      expect(page.status).toBe(200);
      sizes.push(page.body.data.leads.length);
      seen.push(...page.body.data.leads.map((l: { id: string }) => l.id));
      cursor = page.body.data.nextCursor;
    } while (cursor);
    expect(new Set(seen).size).toBe(seen.length);
    expect(seen.length).toBe(6);
    expect(sizes).toEqual([2, 2, 2]);
    const newestFirst = await app.request('GET', '/api/v1/leads?limit=5', { token: a.token });
    expect(newestFirst.body.data.leads.map((l: { fields: { name: string } }) => l.fields.name).slice(0, 5)).toEqual([
      'Lead 4',
      'Lead 3',
      'Lead 2',
      'Lead 1',
      'Lead 0',
    ]);
    expect((await app.request('GET', '/api/v1/leads?cursor=bm90LWEtY3Vyc29y', { token: a.token })).status).toBe(400);
    // Well formed but dated year 0000, which the database refuses: refused here first.
    const yearZero = Buffer.from(JSON.stringify(['0000-01-01T00:00:00.000Z', '7d0c1b9e-0e55-4a4f-8f3c-1f4bb1f0a001'])).toString('base64url');
    const refused = await app.request('GET', `/api/v1/leads?cursor=${yearZero}`, { token: a.token });
    expect(refused.status, refused.text).toBe(400);
    expect(refused.body.error.code).toBe('VALIDATION_FAILED');
    expect((await app.request('GET', '/api/v1/leads?limit=0', { token: a.token })).status).toBe(400);
  });

  it("a lead reaches the owner's webhook as lead.created, signed", async () => {
    await app.setOwner(a.ownerId, { plan: 'enterprise' });
    const hook = await app.request('POST', '/api/v1/enterprise/webhooks', { token: a.token, body: { url: receiver.url, events: ['lead.created'] } });
    expect(hook.status, hook.text).toBe(201);
    const token = await visitorToken(withForm.slug);
    const created = await submit(withForm.slug, token, { fields: { name: 'Grace Hopper', email: 'grace@example.com', phone: '+1 555 0100' } });
    expect(created.status).toBe(201);
    const [delivery] = await receiver.waitFor(1);
    const payload = verifyDelivery(hook.body.data.secret, delivery!);
    expect(payload).toMatchObject({
      type: 'lead.created',
      data: { id: created.body.data.lead.id, chatInterfaceId: withForm.id, fields: { name: 'Grace Hopper', email: 'grace@example.com', phone: '+1 555 0100' } },
    });
  });
});
