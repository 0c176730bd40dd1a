import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSmtpServer, type TestSmtpServer } from '../helpers/smtp-server.ts';
import { startTestApp, type TestApp } from '../helpers/test-app.ts';

/**
 * The contact form's audit findings, through the real listener with a real SMTP server: the confirmation to the
 * (unverified) requester address carries none of the sender's text, and a conversation is attached only for the
 * caller who proves it is theirs, answered alike whether the session exists or not.
 */

let app: TestApp;
let smtp: TestSmtpServer;
let owner: { token: string; ownerId: string; email: string };
let admin: { token: string; ownerId: string; email: string };
let iface: { id: string; slug: string };

const contact = (body: Record<string, unknown>, headers: Record<string, string> = {}, target: TestApp = app) =>
  target.request('POST', '/api/v1/support/contact', {
    body: { name: 'Ada', email: 'ada@example.com', subject: 'Help', message: 'It broke.', ...body },
    headers,
  });
const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

async function visitorWithConversation() {
  const session = await app.request('POST', `/api/v1/chat/${iface.slug}/visitor-sessions`, { body: {} });
  const token = session.body.data.token as string;
  const chat = await app.request('POST', `/api/v1/chat/${iface.slug}/visitor-messages`, { token, body: { message: 'My secret order 4711' } });
  expect(chat.status, chat.text).toBe(200);
  return { token, sessionId: chat.body.sessionId as string };
}

async function ticketOf(reference: string) {
  const list = await app.request('GET', '/api/v1/support/tickets', { token: owner.token });
  const ticket = list.body.data.tickets.find((t: { reference: string }) => t.reference === reference);
  const detail = await app.request('GET', `/api/v1/support/tickets/${ticket.id}`, { token: owner.token });
  return { ticket: detail.body.data.ticket, transcript: detail.body.data.transcript };
}

beforeAll(async () => {
  smtp = await startSmtpServer();
  app = await startTestApp({ SMTP_URL: smtp.url, RATE_LIMIT_SUPPORT: '1000', RATE_LIMIT_SUPPORT_GLOBAL: '1000', RATE_LIMIT_DEFAULT: '10000' });
  owner = await app.signUp('proof-owner');
  admin = await app.signUp('proof-admin');
  await app.deps.database.db.updateTable('owners').set({ role: 'admin' }).where('id', '=', admin.ownerId).execute();
  const kb = (await app.request('POST', '/api/v1/knowledge-base/configs', { token: owner.token, body: { name: 'Help' } })).body.data.config.id;
  const created = await app.request('POST', '/api/v1/chat-interfaces', { token: owner.token, body: { name: 'Shop help', configId: kb, public: true } });
  iface = { id: created.body.data.chatInterface.id, slug: created.body.data.chatInterface.slug };
});
afterAll(async () => {
  await app?.stop();
  await smtp?.close();
});

describe('the confirmation to the requester', () => {
  it('carries the reference and fixed text only, never the sender’s name, subject or message; the admins’ notice keeps them', async () => {
    const res = await contact({
      email: 'victim@example.com',
      name: 'Prize desk http://phish.example',
      subject: 'Buy cheap stuff at http://phish.example',
      message: 'CLICK http://phish.example/login',
    });
    expect(res.status, res.text).toBe(202);
    const reference = res.body.data.ticket.reference as string;
    const [mail] = await smtp.waitFor((m) => m.envelope.to.includes('victim@example.com'));
    expect(mail!.parsed.subject).toBe(`[${reference}] We received your message`);
    expect(mail!.parsed.text).toContain(reference);
    expect(`${mail!.parsed.subject}\n${mail!.parsed.text}`).not.toMatch(/phish|CLICK|Buy cheap|Prize/);
    const [notice] = await smtp.waitFor((m) => m.envelope.to.includes(admin.email) && m.parsed.subject?.includes(reference) === true);
    expect(notice!.parsed.subject).toContain('Buy cheap stuff');
    expect(notice!.parsed.text).toContain('CLICK http://phish.example/login');
  });
});

describe('the conversation of a hand-off', () => {
  it('is attached with the visitor token of that conversation', async () => {
    const visitor = await visitorWithConversation();
    const res = await contact({ slug: iface.slug, sessionId: visitor.sessionId }, bearer(visitor.token));
    expect(res.status, res.text).toBe(202);
    const { ticket, transcript } = await ticketOf(res.body.data.ticket.reference);
    expect(ticket).toMatchObject({ addressedTo: 'owner', sessionId: visitor.sessionId });
    expect(transcript[0].content).toBe('My secret order 4711');
  });

  it('is not attached without that proof, and the answer is the same whether the session exists or not', async () => {
    const visitor = await visitorWithConversation();
    const stranger = (await app.request('POST', `/api/v1/chat/${iface.slug}/visitor-sessions`, { body: {} })).body.data.token as string;
    const attempts = [
      { body: { slug: iface.slug, sessionId: visitor.sessionId }, headers: {} },
      { body: { chatInterfaceId: iface.id, sessionId: visitor.sessionId }, headers: bearer(stranger) },
      { body: { chatInterfaceId: iface.id, sessionId: visitor.sessionId }, headers: bearer('not-a-valid-token-at-all-0123456789') },
      { body: { chatInterfaceId: iface.id, sessionId: 'api_1700000000000_nosuchsession' }, headers: {} },
      { body: { chatInterfaceId: iface.id, sessionId: 'api_1700000000000_nosuchsession' }, headers: bearer(stranger) },
    ];
    for (const { body, headers } of attempts) {
      const res = await contact(body, headers);
      expect(res.status, JSON.stringify(body)).toBe(202);
      expect(Object.keys(res.body.data.ticket).sort()).toEqual(['reference', 'status']);
      const { ticket, transcript } = await ticketOf(res.body.data.ticket.reference);
      expect(ticket).toMatchObject({ addressedTo: 'owner', chatInterfaceId: iface.id, sessionId: null });
      expect(transcript).toBeNull();
    }
    // Another interface's visitor proves nothing here either.
    const other = await app.request('POST', '/api/v1/chat-interfaces', {
      token: owner.token,
      body: { name: 'Other desk', endpointUrl: 'https://example.com/bot', public: true },
    });
    const otherToken = (await app.request('POST', `/api/v1/chat/${other.body.data.chatInterface.slug}/visitor-sessions`, { body: {} })).body.data.token;
    const crossed = await contact({ chatInterfaceId: iface.id, sessionId: visitor.sessionId }, bearer(otherToken));
    expect(crossed.status).toBe(202);
    expect((await ticketOf(crossed.body.data.ticket.reference)).transcript).toBeNull();
  });

  it('a visitor token does not buy a contact budget of its own: the limit stays per client IP', async () => {
    const peer = await app.startPeer({ TRUST_PROXY: '1', RATE_LIMIT_SUPPORT: '2' });
    try {
      const headers = { 'x-forwarded-for': '203.0.113.77' };
      const statuses = [];
      for (let i = 0; i < 3; i++) {
        const token = (await peer.request('POST', `/api/v1/chat/${iface.slug}/visitor-sessions`, { body: {}, headers })).body.data.token as string;
        statuses.push((await contact({ slug: iface.slug }, { ...headers, ...bearer(token) }, peer)).status);
      }
      expect(statuses).toEqual([202, 202, 429]);
    } finally {
      await peer.stop();
    }
  });
});
