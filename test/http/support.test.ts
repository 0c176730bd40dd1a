import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSmtpServer, type TestSmtpServer } from '../helpers/smtp-server.ts';
import { startTestApp, type TestApp } from '../helpers/test-app.ts';

/**
 * Support through the real listener, with a real SMTP server: the public contact form (to admins), a visitor's
 * hand-off (to the interface's owner, with the conversation), the honeypot, per-IP and global limits, ticket
 * replies and status transitions, admin-only fields, and two owners plus an admin for isolation.
 */

let app: TestApp;
let smtp: TestSmtpServer;
let a: { token: string; ownerId: string; email: string };
let b: { token: string; ownerId: string; email: string };
let admin: { token: string; ownerId: string; email: string };
let iface: { id: string; slug: string };

const contact = (body: Record<string, unknown>, target: TestApp = app, headers: Record<string, string> = {}) =>
  target.request('POST', '/api/v1/support/contact', {
    body: { name: 'Ada', email: 'ada@example.com', subject: 'Help', message: 'It broke.', ...body },
    headers,
  });
const ticketCount = async () =>
  Number(
    (
      await app.deps.database.db
        .selectFrom('support_tickets')
        .select((eb) => eb.fn.countAll<string>().as('n'))
        .executeTakeFirstOrThrow()
    ).n,
  );

beforeAll(async () => {
  smtp = await startSmtpServer();
  app = await startTestApp({
    SMTP_URL: smtp.url,
    RATE_LIMIT_SUPPORT: '1000',
    RATE_LIMIT_SUPPORT_GLOBAL: '1000',
    RATE_LIMIT_DEFAULT: '10000',
    // Where mailed links point (the confirmation page); the tests read the token from the mail.
    PUBLIC_ORIGINS: 'https://support.example.test',
  });
  a = await app.signUp('support-a');
  b = await app.signUp('support-b');
  admin = await app.signUp('support-admin');
  await app.deps.database.db.updateTable('owners').set({ role: 'admin' }).where('id', '=', admin.ownerId).execute();
  const kb = (await app.request('POST', '/api/v1/knowledge-base/configs', { token: a.token, body: { name: 'Help' } })).body.data.config.id;
  const created = await app.request('POST', '/api/v1/chat-interfaces', { token: a.token, body: { name: 'Shop help', configId: kb, public: true } });
  iface = { id: created.body.data.chatInterface.id, slug: created.body.data.chatInterface.slug };
});
afterAll(async () => {
  await app?.stop();
  await smtp?.close();
});

describe('contact form', () => {
  it('a request to the service goes to the admins: 202 with a reference, a confirmation and a notification by mail', async () => {
    const res = await contact({ subject: 'Invoice question', category: 'billing', email: 'payer@example.com' });
    expect(res.status, res.text).toBe(202);
    const reference = res.body.data.ticket.reference;
    expect(res.body.data.ticket).toEqual({ reference: expect.stringMatching(/^T-[0-9A-F]{10}$/), status: 'open' });
    await smtp.waitFor((m) => m.envelope.to.includes('payer@example.com') && m.parsed.subject?.includes(reference) === true);
    const [notice] = await smtp.waitFor((m) => m.envelope.to.includes(admin.email) && m.parsed.subject?.includes(reference) === true);
    expect(notice!.parsed.replyTo?.text).toContain('payer@example.com');

    const forAdmin = await app.request('GET', '/api/v1/support/tickets', { token: admin.token });
    const ticket = forAdmin.body.data.tickets.find((t: { reference: string }) => t.reference === reference);
    expect(ticket).toMatchObject({ status: 'open', priority: 'normal', category: 'billing', addressedTo: 'admins', requester: { email: 'payer@example.com' } });
    expect(
      (await app.request('GET', '/api/v1/support/tickets', { token: a.token })).body.data.tickets.map((t: { reference: string }) => t.reference),
    ).not.toContain(reference);
    expect((await app.request('GET', `/api/v1/support/tickets/${ticket.id}`, { token: a.token })).status).toBe(404);
  });

  it('a visitor’s hand-off goes to the interface’s owner with the conversation; other owners never see it', async () => {
    const session = await app.request('POST', `/api/v1/chat/${iface.slug}/visitor-sessions`, { body: {} });
    const chat = await app.request('POST', `/api/v1/chat/${iface.slug}/visitor-messages`, {
      token: session.body.data.token,
      body: { message: 'Where is my parcel?' },
    });
    expect(chat.status, chat.text).toBe(200);
    // The visitor's token proves the conversation is theirs.
    const res = await contact({ chatInterfaceId: iface.id, sessionId: chat.body.sessionId, subject: 'Talk to a person', email: 'visitor@example.com' }, app, {
      authorization: `Bearer ${session.body.data.token}`,
    });
    expect(res.status, res.text).toBe(202);
    const list = await app.request('GET', '/api/v1/support/tickets', { token: a.token });
    const ticket = list.body.data.tickets.find((t: { reference: string }) => t.reference === res.body.data.ticket.reference);
    expect(ticket).toMatchObject({ addressedTo: 'owner', chatInterfaceId: iface.id, sessionId: chat.body.sessionId });
    const detail = await app.request('GET', `/api/v1/support/tickets/${ticket.id}`, { token: a.token });
    expect(detail.body.data.messages).toEqual([expect.objectContaining({ author: 'requester', body: 'It broke.' })]);
    expect(detail.body.data.transcript.map((m: { role: string; content: string }) => m.role)).toEqual(['user', 'assistant']);
    expect(detail.body.data.transcript[0].content).toBe('Where is my parcel?');
    await smtp.waitFor((m) => m.envelope.to.includes(a.email) && m.parsed.subject?.includes('hand-off from Shop help') === true);
    expect((await app.request('GET', `/api/v1/support/tickets/${ticket.id}`, { token: b.token })).status).toBe(404);
    expect((await app.request('PATCH', `/api/v1/support/tickets/${ticket.id}`, { token: b.token, body: { status: 'closed' } })).status).toBe(404);
    // Admins see every ticket.
    expect((await app.request('GET', `/api/v1/support/tickets/${ticket.id}`, { token: admin.token })).status).toBe(200);
    // A made-up or private interface is a 404; another interface's session is not attached (support-contact-proof.test.ts).
    expect((await contact({ chatInterfaceId: '00000000-0000-4000-8000-000000000000' })).status).toBe(404);
  });

  it('the honeypot answers like a success and stores or sends nothing; bad input is a 400 naming the field', async () => {
    const before = await ticketCount();
    const mailsBefore = smtp.messages.length;
    const bot = await contact({ website: 'http://spam.example', email: 'bot@example.com' });
    expect(bot.status).toBe(202);
    expect(bot.body.data.ticket.reference).toMatch(/^T-/);
    await new Promise((r) => setTimeout(r, 300));
    expect(await ticketCount()).toBe(before);
    expect(smtp.messages.slice(mailsBefore).some((m) => m.envelope.to.includes('bot@example.com'))).toBe(false);
    for (const [body, field] of [
      [{ email: 'not-mail' }, 'email'],
      [{ message: '' }, 'message'],
      [{ category: 'gossip' }, 'category'],
      [{ subject: 'x'.repeat(201) }, 'subject'],
    ] as const) {
      const res = await contact(body);
      expect(res.status, field).toBe(400);
      expect(res.body.error.details).toContain(field);
    }
  });
});

describe('tickets', () => {
  it('replies to a hand-off are mailed once the requester confirms the address; transitions; priority and assignee are for admins', async () => {
    const res = await contact({ chatInterfaceId: iface.id, email: 'thread@example.com', subject: 'Refund' });
    const ticket = (await app.request('GET', '/api/v1/support/tickets?status=open', { token: a.token })).body.data.tickets.find(
      (t: { reference: string }) => t.reference === res.body.data.ticket.reference,
    );
    expect(ticket.requester).toEqual({ name: 'Ada', email: 'thread@example.com', confirmed: false });
    const [confirmation] = await smtp.waitFor(
      (m) => m.envelope.to.includes('thread@example.com') && m.parsed.subject === `[${ticket.reference}] We received your message`,
    );
    const link = /https:\/\/support\.example\.test\/support\/confirm#(stc_[A-Za-z0-9_-]+)/.exec(confirmation!.parsed.text ?? '');
    expect(link, confirmation!.parsed.text).not.toBeNull();
    // The token is written into the mail when it is sent: no job keeps it.
    const payloads = await app.deps.database.db.selectFrom('jobs').select('payload').execute();
    expect(JSON.stringify(payloads)).not.toContain(link![1]!);
    const patch = (token: string, body: Record<string, unknown>) => app.request('PATCH', `/api/v1/support/tickets/${ticket.id}`, { token, body });
    const isReply = (m: { envelope: { to: string[] }; parsed: { subject?: string } }) =>
      m.envelope.to.includes('thread@example.com') && m.parsed.subject?.startsWith(`[${ticket.reference}] Re:`) === true;

    // Not confirmed yet: the reply is kept in the thread and waits.
    const replied = await patch(a.token, { reply: 'We are on it.' });
    expect(replied.status, replied.text).toBe(200);
    expect(replied.body.data.ticket).toMatchObject({ status: 'pending', requester: { confirmed: false } });
    const settle = await contact({ email: 'settle@example.com', subject: 'Mail queue marker' });
    await smtp.waitFor((m) => m.envelope.to.includes('settle@example.com') && m.parsed.subject?.includes(settle.body.data.ticket.reference) === true);
    expect(smtp.messages.filter(isReply)).toHaveLength(0);

    const confirm = (token: string) => app.request('POST', '/api/v1/support/confirm', { body: { token } });
    expect((await confirm(`stc_${'x'.repeat(43)}`)).status).toBe(404);
    const confirmed = await confirm(link![1]!);
    expect(confirmed.status, confirmed.text).toBe(200);
    expect(confirmed.body.data.ticket).toEqual({ reference: ticket.reference, confirmed: true });
    const [mail] = await smtp.waitFor(isReply);
    expect(mail!.parsed.text).toContain('We are on it.');
    // A second click mails nothing again; a later reply goes out as it is written.
    expect((await confirm(link![1]!)).status).toBe(200);
    expect((await patch(a.token, { reply: 'Refund sent.' })).body.data.ticket.requester.confirmed).toBe(true);
    await smtp.waitFor((m) => isReply(m) && m.parsed.text?.includes('Refund sent.') === true);
    expect(smtp.messages.filter(isReply).map((m) => m.parsed.text?.trim())).toEqual(['We are on it.', 'Refund sent.']);
    expect((await patch(a.token, { status: 'resolved' })).body.data.ticket.status).toBe('resolved');
    const refused = await patch(a.token, { status: 'pending' });
    expect(refused.status).toBe(409);
    expect(refused.body.error.details).toContain('open, closed');
    expect((await patch(a.token, { status: 'open' })).body.data.ticket.status).toBe('open');
    expect((await patch(a.token, { priority: 'high' })).status).toBe(403);
    const byAdmin = await patch(admin.token, { priority: 'urgent', assignee: 'agent@example.com' });
    expect(byAdmin.body.data.ticket).toMatchObject({ priority: 'urgent', assignee: 'agent@example.com' });
    expect((await patch(a.token, {})).status).toBe(400);
    const thread = await app.request('GET', `/api/v1/support/tickets/${ticket.id}`, { token: a.token });
    expect(thread.body.data.messages.map((m: { author: string }) => m.author)).toEqual(['requester', 'owner', 'owner']);
    expect((await app.request('GET', '/api/v1/support/tickets/not-a-ticket', { token: a.token })).status).toBe(404);
    expect((await app.request('GET', '/api/v1/support/tickets')).status).toBe(401);
  });

  it('confirm refuses hostile input with a clear 4xx, never a 5xx', async () => {
    const post = (rawBody: string, headers: Record<string, string> = {}) =>
      app.request('POST', '/api/v1/support/confirm', { rawBody, headers: { 'content-type': 'application/json', ...headers } });
    const cases: Array<[string, number, string]> = [
      ['{"token":"stc_\\u0000aaaaaaaaaaaa"}', 400, 'VALIDATION_FAILED'],
      ['{"token":12345678901234567890}', 400, 'VALIDATION_FAILED'],
      [`{"token":"${'a'.repeat(10_000)}"}`, 400, 'VALIDATION_FAILED'],
      ['{"token":"short"}', 400, 'VALIDATION_FAILED'],
      ['{}', 400, 'VALIDATION_FAILED'],
      ['{"token":"stc_aaaa', 400, 'MALFORMED_JSON'],
      ['[]', 400, 'VALIDATION_FAILED'],
    ];
    for (const [body, status, code] of cases) {
      const res = await post(body);
      expect([res.status, res.body?.error?.code], body.slice(0, 40)).toEqual([status, code]);
    }
    const huge = await post(`{"token":"${'a'.repeat(2_000_000)}"}`);
    expect(huge.status).toBe(413);
    // No credential is needed, and one sent along changes nothing: an unknown token is a 404 either way.
    expect((await app.request('POST', '/api/v1/support/confirm', { token: a.token, body: { token: `stc_${'b'.repeat(43)}` } })).status).toBe(404);
  });

  it('replies to a ticket for the admins are mailed at once: its confirmation carries no link', async () => {
    const res = await contact({ email: 'direct@example.com', subject: 'Plans' });
    const reference = res.body.data.ticket.reference;
    const [confirmation] = await smtp.waitFor((m) => m.envelope.to.includes('direct@example.com') && m.parsed.subject?.includes(reference) === true);
    expect(confirmation!.parsed.text).not.toContain('/support/confirm');
    const ticket = (await app.request('GET', '/api/v1/support/tickets', { token: admin.token })).body.data.tickets.find(
      (t: { reference: string }) => t.reference === reference,
    );
    expect(ticket).toMatchObject({ addressedTo: 'admins', requester: { confirmed: false } });
    expect((await app.request('PATCH', `/api/v1/support/tickets/${ticket.id}`, { token: admin.token, body: { reply: 'Here are our plans.' } })).status).toBe(
      200,
    );
    const [reply] = await smtp.waitFor((m) => m.envelope.to.includes('direct@example.com') && m.parsed.subject === `[${reference}] Re: Plans`);
    expect(reply!.parsed.text).toContain('Here are our plans.');
  });

  it('pages through tickets newest first', async () => {
    const first = await app.request('GET', '/api/v1/support/tickets?limit=1', { token: admin.token });
    expect(first.body.data.hasMore).toBe(true);
    const second = await app.request('GET', `/api/v1/support/tickets?limit=1&cursor=${first.body.data.nextCursor}`, { token: admin.token });
    expect(second.body.data.tickets[0].id).not.toBe(first.body.data.tickets[0].id);
    expect(Date.parse(second.body.data.tickets[0].createdAt)).toBeLessThanOrEqual(Date.parse(first.body.data.tickets[0].createdAt));
  });
});

describe('limits against distributed bots', () => {
  it('per client IP, and a burst budget for everyone together', async () => {
    const limited = await startTestApp({ TRUST_PROXY: '1', RATE_LIMIT_SUPPORT: '2', RATE_LIMIT_SUPPORT_GLOBAL: '5' });
    try {
      const from = (ip: string) => contact({}, limited, { 'x-forwarded-for': ip });
      // The headers describe the budget nearest to refusing: the per-IP one here (2), not the shared one (5), so
      // a client that stops at Remaining 0 is never refused.
      const first = await from('198.51.100.1');
      expect(first.status).toBe(202);
      expect([first.headers['x-ratelimit-limit'], first.headers['x-ratelimit-remaining']]).toEqual(['2', '1']);
      const second = await from('198.51.100.1');
      expect(second.status).toBe(202);
      expect([second.headers['x-ratelimit-limit'], second.headers['x-ratelimit-remaining']]).toEqual(['2', '0']);
      const perIp = await from('198.51.100.1');
      expect(perIp.status).toBe(429);
      expect(perIp.headers['retry-after']).toBeDefined();
      for (const ip of ['198.51.100.2', '198.51.100.3']) expect((await from(ip)).status).toBe(202);
      // The fifth of the shared budget: it has 0 left, the address's own budget 1, so the shared one is shown.
      const lastShared = await from('198.51.100.4');
      expect(lastShared.status).toBe(202);
      expect([lastShared.headers['x-ratelimit-limit'], lastShared.headers['x-ratelimit-remaining']]).toEqual(['5', '0']);
      // Five accepted in all: a sixth address, never seen before, is refused by the shared budget.
      expect((await from('198.51.100.5')).status).toBe(429);
    } finally {
      await limited.stop();
    }
  });
});
