import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '../helpers/eventually.ts';
import { startSmtpServer, type TestSmtpServer } from '../helpers/smtp-server.ts';
import { startTestApp, type TestApp } from '../helpers/test-app.ts';

/**
 * Fields that end up in mail headers (support subjects and names, booking attendees' names, chat interfaces'
 * names) through the real listener and a real SMTP server: a line break or other control character is a 400
 * naming the field on every route that takes one; a row stored before that check (or a job queued before it)
 * still mails, with the text folded to one line and no header injected; and a message the mailer refuses kills
 * its job at once instead of being retried for a day.
 */

const VICTIM = 'victim@example.com';
const INJECTED = `\r\nBcc: ${VICTIM}`;
let app: TestApp;
let smtp: TestSmtpServer;
let owner: { token: string; ownerId: string; email: string };
let iface: { id: string; slug: string };

const expectRefused = (res: { status: number; text: string; body: any }, field: string) => {
  expect(res.status, res.text).toBe(400);
  expect(res.body.error.code).toBe('VALIDATION_FAILED');
  expect(res.body.error.details).toContain(`${field}: must be a single line`);
};
const contact = (body: Record<string, unknown>) =>
  app.request('POST', '/api/v1/support/contact', { body: { name: 'Eve', email: 'eve@example.com', subject: 'Hi', message: 'm', ...body } });
const job = (id: string) => app.deps.database.db.selectFrom('jobs').select(['status', 'attempts', 'last_error']).where('id', '=', id).executeTakeFirstOrThrow();
const nobodyElseMailed = () => expect(smtp.messages.filter((m) => m.envelope.to.includes(VICTIM))).toEqual([]);

beforeAll(async () => {
  smtp = await startSmtpServer();
  app = await startTestApp({ SMTP_URL: smtp.url, RATE_LIMIT_SUPPORT: '1000', RATE_LIMIT_SUPPORT_GLOBAL: '1000', RATE_LIMIT_DEFAULT: '10000' });
  owner = await app.signUp('mail-fields');
  const created = await app.request('POST', '/api/v1/chat-interfaces', { token: owner.token, body: { name: 'Front desk', public: true } });
  expect(created.status, created.text).toBe(201);
  iface = { id: created.body.data.chatInterface.id, slug: created.body.data.chatInterface.slug };
  const hours = [{ start: '00:00', end: '24:00' }];
  const availability = await app.request('PUT', `/api/v1/chat-interfaces/${iface.id}/availability`, {
    token: owner.token,
    body: {
      timeZone: 'UTC',
      weekly: { mon: hours, tue: hours, wed: hours, thu: hours, fri: hours, sat: hours, sun: hours },
      slotMinutes: 30,
      minNoticeMinutes: 0,
      maxDaysAhead: 365,
    },
  });
  expect(availability.status, availability.text).toBe(200);
});
afterAll(async () => {
  await app?.stop();
  await smtp?.close();
});

describe('single-line fields refuse line breaks and control characters', () => {
  it('support contact: subject and name', async () => {
    expectRefused(await contact({ subject: `Hi${INJECTED}` }), 'subject');
    expectRefused(await contact({ subject: 'Hi\nthere' }), 'subject');
    expectRefused(await contact({ subject: 'Hi\tthere' }), 'subject');
    expectRefused(await contact({ name: `Eve${INJECTED}` }), 'name');
    expectRefused(await contact({ name: 'Eve\u001b[2J' }), 'name');
    // Several lines stay allowed where they belong: the message.
    expect((await contact({ message: 'line one\r\nline two' })).status).toBe(202);
    // Surrounding whitespace is trimmed as before, so a trailing newline is not an error.
    expect((await contact({ subject: 'Hi\r\n' })).status).toBe(202);
  });

  it('bookings: the attendee’s name, from the API, manually and from the chat', async () => {
    const attendee = { name: `Mallory${INJECTED}`, email: 'mal@example.com' };
    const booked = await app.request('POST', '/api/v1/bookings', {
      token: owner.token,
      body: { chatInterfaceId: iface.id, start: '2027-06-01T10:00:00Z', attendee },
    });
    expectRefused(booked, 'attendee.name');
    const manual = await app.request('POST', '/api/v1/bookings/manual', {
      token: owner.token,
      body: { chatInterfaceId: iface.id, start: '2027-06-01T10:00:00Z', end: '2027-06-01T11:00:00Z', attendee: { ...attendee, name: 'Mallory\rX' } },
    });
    expectRefused(manual, 'attendee.name');
    const visitor = await app.request('POST', `/api/v1/chat/${iface.slug}/visitor-sessions`, { body: {} });
    expect(visitor.status, visitor.text).toBe(201);
    const fromChat = await app.request('POST', `/api/v1/chat/${iface.slug}/bookings`, {
      token: visitor.body.data.token,
      body: { start: '2027-06-01T10:00:00Z', attendee },
    });
    expectRefused(fromChat, 'attendee.name');
    expect(await app.deps.database.db.selectFrom('bookings').select('id').execute()).toEqual([]);
  });

  it('chat interfaces: the name, on create and on update', async () => {
    expectRefused(await app.request('POST', '/api/v1/chat-interfaces', { token: owner.token, body: { name: 'Desk\nBcc: x@example.com' } }), 'name');
    expectRefused(await app.request('PATCH', `/api/v1/chat-interfaces/${iface.id}`, { token: owner.token, body: { name: 'Desk\nTwo' } }), 'name');
    const renamed = await app.request('PATCH', `/api/v1/chat-interfaces/${iface.id}`, { token: owner.token, body: { name: 'Front desk (EU)' } });
    expect(renamed.status, renamed.text).toBe(200);
    expect(renamed.body.data.chatInterface.name).toBe('Front desk (EU)');
  });
});

describe('rows stored before the check still mail, folded to one line', () => {
  it('a ticket subject: the reply goes with the subject on one line, to the requester only', async () => {
    const res = await contact({ chatInterfaceId: iface.id, email: 'legacy-ticket@example.com', subject: 'Legacy' });
    expect(res.status, res.text).toBe(202);
    const reference = res.body.data.ticket.reference as string;
    await app.deps.database.db
      .updateTable('support_tickets')
      // As stored before: unchecked subject, and (as migration 0027 counts older tickets) a confirmed requester.
      .set({ subject: `Old${INJECTED}`, requester_confirmed_at: new Date() })
      .where('reference', '=', reference)
      .execute();
    const ticket = (await app.request('GET', '/api/v1/support/tickets', { token: owner.token })).body.data.tickets.find(
      (t: { reference: string }) => t.reference === reference,
    );
    const reply = await app.request('PATCH', `/api/v1/support/tickets/${ticket.id}`, { token: owner.token, body: { reply: 'Answered.' } });
    expect(reply.status, reply.text).toBe(200);
    const [mail] = await smtp.waitFor((m) => m.parsed.subject === `[${reference}] Re: Old Bcc: ${VICTIM}`);
    expect(mail!.envelope.to).toEqual(['legacy-ticket@example.com']);
    nobodyElseMailed();
  });

  it('an interface’s and an attendee’s names: the invitation and the cancellation go, to the attendee and the owner only', async () => {
    await app.deps.database.db
      .updateTable('chat_interfaces')
      .set({ name: `Legacy desk${INJECTED}` })
      .where('id', '=', iface.id)
      .execute();
    const created = await app.request('POST', '/api/v1/bookings/manual', {
      token: owner.token,
      body: { chatInterfaceId: iface.id, start: '2027-06-02T10:00:00Z', end: '2027-06-02T11:00:00Z', attendee: { name: 'Ada', email: 'ada@example.com' } },
    });
    expect(created.status, created.text).toBe(201);
    const id = created.body.data.booking.id as string;
    const [confirmed] = await smtp.waitFor((m) => m.envelope.to.includes('ada@example.com') && m.parsed.subject?.startsWith('Confirmed:') === true);
    expect(confirmed!.parsed.subject).toMatch(new RegExp(`^Confirmed: Legacy desk Bcc: ${VICTIM}, `));
    expect(confirmed!.envelope.to).toEqual(['ada@example.com']);

    await app.deps.database.db
      .updateTable('bookings')
      .set({ attendee_name: `Mallory${INJECTED}` })
      .where('id', '=', id)
      .execute();
    expect((await app.request('POST', `/api/v1/bookings/${id}/cancel`, { token: owner.token, body: {} })).status).toBe(200);
    const [cancelled] = await smtp.waitFor((m) => m.envelope.to.includes(owner.email) && m.parsed.subject?.startsWith('Cancelled:') === true);
    expect(cancelled!.parsed.subject).toMatch(new RegExp(`^Cancelled: Legacy desk Bcc: ${VICTIM}: Mallory Bcc: ${VICTIM}, `));
    expect(cancelled!.envelope.to).toEqual([owner.email]);
    nobodyElseMailed();
    const failing = await app.deps.database.db.selectFrom('jobs').select('id').where('last_error', 'like', '%must not contain%').execute();
    expect(failing).toEqual([]);
  });

  it('a support mail queued with a line break in its subject goes, folded', async () => {
    await app.deps.jobs.enqueue('support.mail', { to: ['queued@example.com'], subject: `[T-0000000000] Queued${INJECTED}`, text: 'm' }, { maxAttempts: 10 });
    app.deps.jobs.notify();
    const [mail] = await smtp.waitFor((m) => m.envelope.to.includes('queued@example.com'));
    expect(mail!.parsed.subject).toBe(`[T-0000000000] Queued Bcc: ${VICTIM}`);
    nobodyElseMailed();
  });
});

describe('a message the mailer refuses', () => {
  it('kills its job on the first attempt instead of retrying it', async () => {
    const id = await app.deps.jobs.enqueue('support.mail', { to: [`someone@example.com${INJECTED}`], subject: 'Hi', text: 'm' }, { maxAttempts: 10 });
    app.deps.jobs.notify();
    await eventually(async () => (await job(id)).status === 'dead', 'the job is dead', 10_000);
    expect(await job(id)).toMatchObject({ status: 'dead', attempts: 1, last_error: expect.stringContaining('recipient must not contain CR, LF or NUL') });
    nobodyElseMailed();
  });
});
