import ICAL from 'ical.js';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSmtpServer, type TestSmtpServer } from '../helpers/smtp-server.ts';
import { startTestApp, type TestApp } from '../helpers/test-app.ts';
import { startWebhookReceiver, verifyDelivery, type WebhookReceiver } from '../helpers/webhook-receiver.ts';

/**
 * Bookings through the real listener, with a real SMTP server receiving the invitations: availability, slots in
 * another zone and across a DST change, booking, double booking (also 20 at once, across two instances), manual
 * bookings, cancellation by the owner and by the attendee's link, the chat's booking tool, isolation.
 */

let app: TestApp;
let smtp: TestSmtpServer;
let receiver: WebhookReceiver;
let a: { token: string; ownerId: string; email: string };
let b: { token: string; ownerId: string; email: string };
let iface: { id: string; slug: string };

// New York: 2027-03-12 is a Friday in EST (-5), 2027-03-15 a Monday in EDT (-4); DST starts 2027-03-14.
const hours = [
  { start: '09:00', end: '12:00' },
  { start: '13:00', end: '17:00' },
];
const availability = {
  timeZone: 'America/New_York',
  weekly: { mon: hours, tue: hours, wed: hours, thu: hours, fri: hours, sat: [], sun: [] },
  overrides: [{ date: '2027-03-17', ranges: [] }],
  slotMinutes: 30,
  minNoticeMinutes: 60,
  maxDaysAhead: 365,
};
const attendee = { name: 'Zoë Visitor', email: 'zoe@example.com', timeZone: 'Europe/Berlin' };

const book = (token: string, start: string, extra: Record<string, unknown> = {}) =>
  app.request('POST', '/api/v1/bookings', { token, body: { chatInterfaceId: iface.id, start, attendee, ...extra } });

function calendarOf(mail: TestSmtpServer['messages'][number]) {
  const part = mail.parsed.attachments.find((att) => att.contentType.startsWith('text/calendar'));
  const text = part ? part.content.toString('utf8') : String((mail.parsed as { textAsHtml?: string }).textAsHtml ?? '');
  const calendar = new ICAL.Component(ICAL.parse(text));
  const event = calendar.getFirstSubcomponent('vevent')!;
  return {
    method: calendar.getFirstPropertyValue('method'),
    uid: event.getFirstPropertyValue('uid'),
    sequence: Number(event.getFirstPropertyValue('sequence') ?? 0),
    status: event.getFirstPropertyValue('status'),
    start: (event.getFirstPropertyValue('dtstart') as ICAL.Time).toJSDate().toISOString(),
  };
}

beforeAll(async () => {
  smtp = await startSmtpServer();
  receiver = await startWebhookReceiver();
  app = await startTestApp({
    SMTP_URL: smtp.url,
    MAIL_FROM: 'Bookings <bookings@service.test>',
    RATE_LIMIT_DEFAULT: '100000',
    OUTBOUND_ALLOW_HOSTS: receiver.hostPort,
    PUBLIC_ORIGINS: 'https://book.example',
  });
  a = await app.signUp('book-a');
  b = await app.signUp('book-b');
  const kb = (await app.request('POST', '/api/v1/knowledge-base/configs', { token: a.token, body: { name: 'Bookings' } })).body.data.config.id;
  const tools = await app.request('PATCH', `/api/v1/knowledge-base/configs/${kb}/tools`, {
    token: a.token,
    body: { tools: [{ name: 'book_slot', enabled: true }] },
  });
  expect(tools.status, tools.text).toBe(200);
  const created = await app.request('POST', '/api/v1/chat-interfaces', { token: a.token, body: { name: 'Consulting', configId: kb, public: true } });
  iface = { id: created.body.data.chatInterface.id, slug: created.body.data.chatInterface.slug };
});
afterAll(async () => {
  await app?.stop();
  await smtp?.close();
  await receiver?.close();
});

describe('availability', () => {
  it('is null until set, validated naming the field, and another owner’s interface is a 404', async () => {
    expect((await app.request('GET', `/api/v1/chat-interfaces/${iface.id}/availability`, { token: a.token })).body.data.availability).toBeNull();
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ ...availability, timeZone: 'Mars/Olympus' }, 'timeZone'],
      [{ ...availability, weekly: { ...availability.weekly, mon: [{ start: '9am', end: '12:00' }] } }, 'weekly.mon.0.start'],
      [{ ...availability, weekly: { ...availability.weekly, mon: [{ start: '12:00', end: '09:00' }] } }, 'weekly.mon.0.end'],
      [{ ...availability, overrides: [{ date: '2027-02-30', ranges: [] }] }, 'overrides.0.date'],
      [{ ...availability, slotMinutes: 0 }, 'slotMinutes'],
    ];
    for (const [body, field] of cases) {
      const res = await app.request('PUT', `/api/v1/chat-interfaces/${iface.id}/availability`, { token: a.token, body });
      expect(res.status, field).toBe(400);
      expect(res.body.error.details).toContain(field);
    }
    expect((await app.request('PUT', `/api/v1/chat-interfaces/${iface.id}/availability`, { token: b.token, body: availability })).status).toBe(404);
    expect((await app.request('PUT', `/api/v1/chat-interfaces/${iface.id}/availability`, { body: availability })).status).toBe(401);
    const saved = await app.request('PUT', `/api/v1/chat-interfaces/${iface.id}/availability`, { token: a.token, body: availability });
    expect(saved.status, saved.text).toBe(200);
    expect(saved.body.data.availability).toMatchObject({ timeZone: 'America/New_York', slotMinutes: 30, intervalMinutes: 30, maxPerDay: null });
    expect((await app.request('GET', `/api/v1/chat-interfaces/${iface.id}/availability`, { token: b.token })).status).toBe(404);
  });
});

describe('available slots', () => {
  it('follow the owner’s wall clock across DST, with the requested zone beside each', async () => {
    const slots = async (from: string, to: string, zone: string) => {
      const res = await app.request(
        'GET',
        `/api/v1/bookings/available-slots?chatInterfaceId=${iface.id}&from=${from}&to=${to}&timeZone=${encodeURIComponent(zone)}`,
        { token: a.token },
      );
      expect(res.status, res.text).toBe(200);
      return res.body.data;
    };
    const friday = await slots('2027-03-12T00:00:00.000Z', '2027-03-13T00:00:00.000Z', 'Asia/Tokyo');
    expect(friday.slots[0]).toEqual({
      start: '2027-03-12T14:00:00.000Z',
      end: '2027-03-12T14:30:00.000Z',
      localStart: '2027-03-12T23:00:00.000+09:00',
      localEnd: '2027-03-12T23:30:00.000+09:00',
    });
    // 09:00-12:00 and 13:00-17:00: 6 + 8 slots, none in the lunch gap.
    expect(friday.slots).toHaveLength(14);
    expect(friday.slots.map((s: { start: string }) => s.start)).not.toContain('2027-03-12T17:00:00.000Z');
    const monday = await slots('2027-03-15T00:00:00.000Z', '2027-03-16T00:00:00.000Z', 'America/New_York');
    expect(monday.slots[0].start).toBe('2027-03-15T13:00:00.000Z');
    expect(monday.slots[0].localStart).toBe('2027-03-15T09:00:00.000-04:00');
    // The weekend and the day off (an override) have none.
    expect((await slots('2027-03-13T00:00:00.000Z', '2027-03-15T04:00:00.000Z', 'UTC')).slots).toEqual([]);
    expect((await slots('2027-03-17T04:00:00.000Z', '2027-03-18T04:00:00.000Z', 'UTC')).slots).toEqual([]);
  });

  it('refuses bad windows and zones; another owner’s interface is a 404', async () => {
    const base = `/api/v1/bookings/available-slots?chatInterfaceId=${iface.id}`;
    expect((await app.request('GET', `${base}&from=2027-03-12T00:00:00Z&to=2027-03-11T00:00:00Z`, { token: a.token })).status).toBe(400);
    expect((await app.request('GET', `${base}&from=2027-03-01T00:00:00Z&to=2027-06-01T00:00:00Z`, { token: a.token })).status).toBe(400);
    expect((await app.request('GET', `${base}&timeZone=Nowhere`, { token: a.token })).status).toBe(400);
    expect((await app.request('GET', '/api/v1/bookings/available-slots', { token: a.token })).status).toBe(400);
    // Years the arithmetic and the database cannot take are refused up front (one once looped for ever).
    for (const window of ['from=9999-12-01T00:00:00Z&to=9999-12-29T23:30:00Z', 'from=0000-01-01T00:00:00Z&to=0000-01-02T00:00:00Z']) {
      const res = await app.request('GET', `${base}&${window}`, { token: a.token });
      expect(res.status, window).toBe(400);
      expect(res.body.error.details).toContain('between 1970 and 9000');
    }
    expect((await book(a.token, '9999-12-31T00:00:00Z')).status).toBe(400);
    expect((await app.request('GET', base, { token: b.token })).status).toBe(404);
    expect((await app.request('GET', base)).status).toBe(401);
    // An interface without booking hours refuses the same bad window (it used to answer 200 with no slots).
    const bare = await app.request('POST', '/api/v1/chat-interfaces', { token: a.token, body: { name: 'No hours' } });
    expect(bare.status, bare.text).toBe(201);
    const bareBase = `/api/v1/bookings/available-slots?chatInterfaceId=${bare.body.data.chatInterface.id}`;
    const reversed = await app.request('GET', `${bareBase}&from=2027-03-12T00:00:00Z&to=2027-03-11T00:00:00Z`, { token: a.token });
    expect([reversed.status, reversed.body.error?.details]).toEqual([400, 'to: must be after from']);
    expect((await app.request('GET', bareBase, { token: a.token })).body.data).toEqual({
      timeZone: 'UTC',
      availabilityTimeZone: null,
      slots: [],
      truncated: false,
    });
  });
});

describe('booking', () => {
  it('books a free slot, mails both an invitation, refuses the same slot and off-grid times with 409', async () => {
    const res = await book(a.token, '2027-03-15T13:00:00.000Z', { notes: 'About the offer' });
    expect(res.status, res.text).toBe(201);
    const booking = res.body.data.booking;
    expect(booking).toMatchObject({
      status: 'confirmed',
      source: 'api',
      start: '2027-03-15T13:00:00.000Z',
      end: '2027-03-15T13:30:00.000Z',
      localStart: '2027-03-15T14:00:00.000+01:00',
      attendee: { name: 'Zoë Visitor', email: 'zoe@example.com', phone: null, timeZone: 'Europe/Berlin' },
      exclusive: true,
    });
    expect((await book(a.token, '2027-03-15T13:00:00.000Z')).status).toBe(409);
    expect((await book(a.token, '2027-03-15T13:10:00.000Z')).status).toBe(409);
    expect((await book(a.token, '2027-03-13T15:00:00.000Z')).status).toBe(409);
    const after = await app.request(
      'GET',
      `/api/v1/bookings/available-slots?chatInterfaceId=${iface.id}&from=2027-03-15T00:00:00.000Z&to=2027-03-16T00:00:00.000Z`,
      { token: a.token },
    );
    expect(after.body.data.slots[0].start).toBe('2027-03-15T13:30:00.000Z');

    const mails = await smtp.waitFor((m) => m.parsed.subject?.includes('2027') === true && calendarOf(m).uid === `${booking.id}@chat-interface-service`, 2);
    const toAttendee = mails.find((m) => m.envelope.to.includes('zoe@example.com'))!;
    const toOwner = mails.find((m) => m.envelope.to.includes(a.email))!;
    expect(toAttendee.parsed.subject).toMatch(/^Confirmed: Consulting, Monday, 15 March 2027 at 14:00/);
    expect(toOwner.parsed.subject).toMatch(/^New booking: Zoë Visitor, Monday, 15 March 2027 at 09:00/);
    expect(calendarOf(toAttendee)).toMatchObject({ method: 'REQUEST', sequence: 0, status: 'CONFIRMED', start: '2027-03-15T13:00:00.000Z' });
    // The link's origin is the configured one, never the request's Host.
    expect(toAttendee.parsed.text).toMatch(/To cancel: https:\/\/book\.example\/bookings\/cancel#bkc_/);
  });

  it('twenty requests for one slot at once, across two instances: exactly one 201, nineteen 409', async () => {
    const peer = await app.startPeer();
    try {
      const start = '2027-03-16T14:00:00.000Z';
      const results = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          (i % 2 === 0 ? app : peer).request('POST', '/api/v1/bookings', {
            token: a.token,
            body: { chatInterfaceId: iface.id, start, attendee: { ...attendee, email: `racer${i}@example.com` } },
          }),
        ),
      );
      const statuses = results.map((r) => r.status).sort();
      expect(statuses.filter((s) => s === 201)).toHaveLength(1);
      expect(statuses.filter((s) => s === 409)).toHaveLength(19);
      const rows = await app.deps.database.db
        .selectFrom('bookings')
        .select('id')
        .where('chat_interface_id', '=', iface.id)
        .where('start_at', '=', new Date(start))
        .where('status', '=', 'confirmed')
        .execute();
      expect(rows).toHaveLength(1);
    } finally {
      await peer.stop();
    }
  });

  it('the database itself refuses an overlapping confirmed booking (exclusion constraint)', async () => {
    const db = app.deps.database.db;
    const insert = (id: string, start: string, end: string) =>
      sql`insert into bookings (id, owner_id, chat_interface_id, status, source, start_at, end_at, attendee_name, attendee_email, attendee_time_zone, cancel_token_hash)
          values (${id}, ${a.ownerId}, ${iface.id}, 'confirmed', 'api', ${start}, ${end}, 'x', 'x@example.com', 'UTC', ${id})`.execute(db);
    await insert('00000000-0000-4000-8000-000000000001', '2027-04-01T10:00:00Z', '2027-04-01T11:00:00Z');
    await expect(insert('00000000-0000-4000-8000-000000000002', '2027-04-01T10:30:00Z', '2027-04-01T11:30:00Z')).rejects.toMatchObject({ code: '23P01' });
    await db.deleteFrom('bookings').where('id', '=', '00000000-0000-4000-8000-000000000001').execute();
  });

  it('manual bookings ignore the hours but not other bookings, unless allowOverlap', async () => {
    const manual = (body: Record<string, unknown>) =>
      app.request('POST', '/api/v1/bookings/manual', { token: a.token, body: { chatInterfaceId: iface.id, attendee, ...body } });
    const sunday = await manual({ start: '2027-03-21T20:00:00.000Z', end: '2027-03-21T21:15:00.000Z' });
    expect(sunday.status, sunday.text).toBe(201);
    expect(sunday.body.data.booking).toMatchObject({ source: 'manual', exclusive: true });
    expect((await manual({ start: '2027-03-21T21:00:00.000Z', end: '2027-03-21T21:30:00.000Z' })).status).toBe(409);
    const overlap = await manual({ start: '2027-03-21T21:00:00.000Z', end: '2027-03-21T21:30:00.000Z', allowOverlap: true });
    expect(overlap.status).toBe(201);
    expect(overlap.body.data.booking.exclusive).toBe(false);
    expect((await manual({ start: '2027-03-21T21:00:00.000Z', end: '2027-03-21T20:00:00.000Z' })).body.error.details).toContain('end');
    expect((await manual({ start: 'tomorrow', end: '2027-03-21T20:00:00.000Z' })).status).toBe(400);
    expect(
      (
        await app.request('POST', '/api/v1/bookings/manual', {
          token: b.token,
          body: { chatInterfaceId: iface.id, attendee, start: '2027-03-21T10:00:00Z', end: '2027-03-21T11:00:00Z' },
        })
      ).status,
    ).toBe(404);
  });

  it('refuses bad attendees naming the field; 401 without a session; another owner’s interface is a 404', async () => {
    const bad = await book(a.token, '2027-03-18T14:00:00.000Z', { attendee: { name: 'X', email: 'not-an-email' } });
    expect(bad.status).toBe(400);
    expect(bad.body.error.details).toContain('attendee.email');
    expect((await book(b.token, '2027-03-18T14:00:00.000Z')).status).toBe(404);
    expect((await app.request('POST', '/api/v1/bookings', { body: { chatInterfaceId: iface.id, start: '2027-03-18T14:00:00.000Z', attendee } })).status).toBe(
      401,
    );
  });
});

describe('cancelling', () => {
  it('the owner cancels once (idempotent), the slot is free again, and the attendee gets METHOD:CANCEL with a higher SEQUENCE', async () => {
    const created = (await book(a.token, '2027-03-18T15:00:00.000Z')).body.data.booking;
    expect((await app.request('POST', `/api/v1/bookings/${created.id}/cancel`, { token: b.token, body: {} })).status).toBe(404);
    const first = await app.request('POST', `/api/v1/bookings/${created.id}/cancel`, { token: a.token, body: { reason: 'Ill' } });
    expect(first.status, first.text).toBe(200);
    expect(first.body.data.booking).toMatchObject({ status: 'cancelled', cancelReason: 'Ill', cancelledBy: 'owner' });
    const second = await app.request('POST', `/api/v1/bookings/${created.id}/cancel`, { token: a.token, body: { reason: 'Other' } });
    expect(second.body.data.booking).toEqual(first.body.data.booking);
    expect((await book(a.token, '2027-03-18T15:00:00.000Z')).status).toBe(201);

    const [cancel] = await smtp.waitFor(
      (m) =>
        m.envelope.to.includes('zoe@example.com') && m.parsed.subject?.startsWith('Cancelled:') === true && String(calendarOf(m).uid).startsWith(created.id),
    );
    expect(calendarOf(cancel!)).toMatchObject({ method: 'CANCEL', sequence: 1, status: 'CANCELLED' });
    expect(cancel!.parsed.text).toContain('Reason: Ill');
  });

  it('the attendee cancels through the link in their mail; a made-up token is a 404', async () => {
    const created = (await book(a.token, '2027-03-19T14:00:00.000Z', { attendee: { ...attendee, email: 'linker@example.com' } })).body.data.booking;
    const [mail] = await smtp.waitFor((m) => m.envelope.to.includes('linker@example.com') && m.parsed.subject?.startsWith('Confirmed:') === true);
    const token = /#(bkc_[A-Za-z0-9_-]+)/.exec(mail!.parsed.text ?? '')![1]!;
    expect((await app.request('POST', '/api/v1/bookings/attendee-cancel', { body: { token: `${token}x` } })).status).toBe(404);
    const res = await app.request('POST', '/api/v1/bookings/attendee-cancel', { body: { token, reason: 'Cannot make it' } });
    expect(res.status, res.text).toBe(200);
    expect(res.body.data.booking).toEqual({ id: created.id, status: 'cancelled', start: created.start, end: created.end });
    const listed = await app.request('GET', `/api/v1/bookings?status=cancelled&chatInterfaceId=${iface.id}`, { token: a.token });
    expect(listed.body.data.bookings.find((x: { id: string }) => x.id === created.id)).toMatchObject({
      cancelledBy: 'attendee',
      cancelReason: 'Cannot make it',
    });
  });

  it('a reminder goes out before the meeting as a durable job, and not after a cancellation', async () => {
    const created = (await book(a.token, '2027-03-22T14:00:00.000Z', { attendee: { ...attendee, email: 'remind@example.com' } })).body.data.booking;
    const db = app.deps.database.db;
    const due = await sql<{ n: number }>`update jobs set run_at = now() where kind = 'booking.mail' and status = 'queued'
      and payload->>'bookingId' = ${created.id} and payload->>'kind' = 'reminder' returning 1 as n`.execute(db);
    expect(due.rows).toHaveLength(1);
    app.deps.jobs.notify();
    const [reminder] = await smtp.waitFor((m) => m.envelope.to.includes('remind@example.com') && m.parsed.subject?.startsWith('Reminder:') === true);
    expect(reminder!.parsed.subject).toContain('Consulting');

    const other = (await book(a.token, '2027-03-22T15:00:00.000Z')).body.data.booking;
    await app.request('POST', `/api/v1/bookings/${other.id}/cancel`, { token: a.token, body: {} });
    const left = await sql<{ n: number }>`select count(*)::int as n from jobs where kind = 'booking.mail' and status = 'queued'
      and payload->>'bookingId' = ${other.id} and payload->>'kind' = 'reminder'`.execute(db);
    expect(left.rows[0]!.n).toBe(0);
  });
});

describe('events', () => {
  it('booking.created and booking.cancelled reach the owner’s webhook, signed', async () => {
    await app.setOwner(a.ownerId, { plan: 'enterprise' });
    const hook = await app.request('POST', '/api/v1/enterprise/webhooks', {
      token: a.token,
      body: { url: receiver.url, events: ['booking.created', 'booking.cancelled'] },
    });
    expect(hook.status, hook.text).toBe(201);
    const created = (await book(a.token, '2027-03-23T14:00:00.000Z')).body.data.booking;
    await app.request('POST', `/api/v1/bookings/${created.id}/cancel`, { token: a.token, body: { reason: 'Moved' } });
    const deliveries = await receiver.waitFor(2);
    const payloads = deliveries.map((d) => verifyDelivery(hook.body.data.secret, d) as { type: string; data: { id: string; status: string } });
    expect(payloads.map((p) => [p.type, p.data.id, p.data.status]).sort()).toEqual([
      ['booking.cancelled', created.id, 'cancelled'],
      ['booking.created', created.id, 'confirmed'],
    ]);
  });
});

describe('listing', () => {
  it('filters by interface, status and time range, paginates, and shows another owner nothing', async () => {
    const all = await app.request('GET', `/api/v1/bookings?chatInterfaceId=${iface.id}&limit=2`, { token: a.token });
    expect(all.status).toBe(200);
    expect(all.body.data.bookings).toHaveLength(2);
    expect(all.body.data.total).toBeGreaterThan(4);
    const starts = all.body.data.bookings.map((x: { start: string }) => x.start);
    expect([...starts].sort()).toEqual(starts);
    const range = await app.request('GET', '/api/v1/bookings?from=2027-03-15T00:00:00.000Z&to=2027-03-16T00:00:00.000Z&status=confirmed', { token: a.token });
    expect(range.body.data.bookings.map((x: { start: string }) => x.start)).toEqual(['2027-03-15T13:00:00.000Z']);
    expect((await app.request('GET', '/api/v1/bookings', { token: b.token })).body.data).toMatchObject({ bookings: [], total: 0 });
    expect((await app.request('GET', '/api/v1/bookings?status=maybe', { token: a.token })).status).toBe(400);
    expect((await app.request('GET', '/api/v1/bookings')).status).toBe(401);
  });

  it('a chatInterfaceId filter naming no interface of the caller (another owner’s, unknown, malformed) is a 404, as for a missing interface', async () => {
    for (const id of [iface.id, '7a1b2c3d-0000-4000-8000-000000000000', 'not-an-id']) {
      const res = await app.request('GET', `/api/v1/bookings?chatInterfaceId=${id}`, { token: b.token });
      expect(res.status, id).toBe(404);
      expect(res.body.error.message).toBe('Chat interface not found');
    }
    const own = await app.request('POST', '/api/v1/chat-interfaces', { token: b.token, body: { name: 'B desk' } });
    const mine = await app.request('GET', `/api/v1/bookings?chatInterfaceId=${own.body.data.chatInterface.id}`, { token: b.token });
    expect(mine.status, mine.text).toBe(200);
    expect(mine.body.data).toMatchObject({ bookings: [], total: 0 });
  });
});

describe('booking from the chat', () => {
  it('the booking tool offers real free slots; the visitor books one and the conversation confirms it', async () => {
    await app.request('PUT', `/api/v1/chat-interfaces/${iface.id}/availability`, {
      token: a.token,
      body: {
        ...availability,
        minNoticeMinutes: 0,
        maxDaysAhead: 30,
        weekly: Object.fromEntries(['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'].map((d) => [d, [{ start: '00:00', end: '24:00' }]])),
      },
    });
    const session = await app.request('POST', `/api/v1/chat/${iface.slug}/visitor-sessions`, { body: {} });
    const token = session.body.data.token as string;
    const chat = await app.request('POST', `/api/v1/chat/${iface.slug}/visitor-messages`, { token, body: { message: 'Can I book an appointment?' } });
    expect(chat.status, chat.text).toBe(200);
    const call = chat.body.toolCalls[0];
    expect(call.name).toBe('book_slot');
    expect(call.arguments).toMatchObject({
      durationMinutes: 30,
      timeZone: 'America/New_York',
      book: { method: 'POST', path: `/api/v1/chat/${iface.slug}/bookings` },
    });
    expect(call.arguments.slots).toHaveLength(6);
    const picked = call.arguments.slots[0];

    const other = await app.request('POST', `/api/v1/chat/${iface.slug}/visitor-sessions`, { body: {} });
    const stranger = await app.request('POST', `/api/v1/chat/${iface.slug}/bookings`, {
      token: other.body.data.token,
      body: { sessionId: chat.body.sessionId, start: picked.start, attendee },
    });
    expect(stranger.status).toBe(404);

    const booked = await app.request('POST', `/api/v1/chat/${iface.slug}/bookings`, {
      token,
      body: { sessionId: chat.body.sessionId, start: picked.start, attendee: { ...attendee, email: 'chatter@example.com' } },
    });
    expect(booked.status, booked.text).toBe(201);
    expect(booked.body.data.booking).toMatchObject({ status: 'confirmed', start: picked.start });
    expect(booked.body.data.message.toolCalls[0]).toMatchObject({ name: 'book_slot', result: { id: booked.body.data.booking.id } });
    const again = await app.request('POST', `/api/v1/chat/${iface.slug}/bookings`, { token, body: { start: picked.start, attendee } });
    expect(again.status).toBe(409);

    const history = await app.request('GET', `/api/v1/chat/${iface.slug}/visitor-history?sessionId=${chat.body.sessionId}`, { token });
    const last = history.body.data.messages.at(-1);
    expect(last.content).toMatch(/^Booked: /);
    expect(last.toolCalls[0].result.id).toBe(booked.body.data.booking.id);
    const listed = await app.request('GET', `/api/v1/bookings?chatInterfaceId=${iface.id}&from=${picked.start}&to=${picked.end}`, { token: a.token });
    expect(listed.body.data.bookings[0]).toMatchObject({ source: 'chat', sessionId: chat.body.sessionId });
    await smtp.waitFor((m) => m.envelope.to.includes('chatter@example.com'));
  });

  it('an interface without the booking tool does not show slots to visitors', async () => {
    const plain = await app.request('POST', '/api/v1/chat-interfaces', {
      token: a.token,
      body: { name: 'Plain', endpointUrl: 'https://example.com/bot', public: true },
    });
    const slug = plain.body.data.chatInterface.slug;
    const session = await app.request('POST', `/api/v1/chat/${slug}/visitor-sessions`, { body: {} });
    const res = await app.request('GET', `/api/v1/chat/${slug}/bookings/available-slots`, { token: session.body.data.token });
    expect(res.status).toBe(403);
    expect((await app.request('GET', `/api/v1/chat/${iface.slug}/bookings/available-slots`, { token: session.body.data.token })).status).toBe(403);
  });
});

describe('zone names', () => {
  it('are answered and stored in their canonical spelling, whatever the caller’s capitalisation', async () => {
    // Slots, the owner's and the anonymous visitor's: the zone echoed is the canonical one (luxon caches per name).
    const owner = await app.request('GET', `/api/v1/bookings/available-slots?chatInterfaceId=${iface.id}&timeZone=eUROPE/bERLIN`, { token: a.token });
    expect(owner.status, owner.text).toBe(200);
    expect(owner.body.data.timeZone).toBe('Europe/Berlin');
    const session = await app.request('POST', `/api/v1/chat/${iface.slug}/visitor-sessions`, { body: {} });
    const visitor = await app.request('GET', `/api/v1/chat/${iface.slug}/bookings/available-slots?timeZone=eUROPE/bERLIN`, {
      token: session.body.data.token,
    });
    expect(visitor.status, visitor.text).toBe(200);
    expect(visitor.body.data.timeZone).toBe('Europe/Berlin');
    expect(
      (await app.request('GET', `/api/v1/chat/${iface.slug}/bookings/available-slots?timeZone=eUROPE/bERLINN`, { token: session.body.data.token })).status,
    ).toBe(400);

    // The availability's zone, stored and answered canonical (a current IANA name stays current: Asia/Kolkata).
    const desk = await app.request('POST', '/api/v1/chat-interfaces', { token: a.token, body: { name: 'Zones' } });
    const deskId = desk.body.data.chatInterface.id as string;
    const saved = await app.request('PUT', `/api/v1/chat-interfaces/${deskId}/availability`, {
      token: a.token,
      body: { ...availability, timeZone: 'aSIA/kOLKATA' },
    });
    expect(saved.status, saved.text).toBe(200);
    expect(saved.body.data.availability.timeZone).toBe('Asia/Kolkata');
    expect((await app.request('GET', `/api/v1/chat-interfaces/${deskId}/availability`, { token: a.token })).body.data.availability.timeZone).toBe(
      'Asia/Kolkata',
    );
    const db = app.deps.database.db;
    const availabilityRow = await db.selectFrom('booking_availability').select('time_zone').where('chat_interface_id', '=', deskId).executeTakeFirstOrThrow();
    expect(availabilityRow.time_zone).toBe('Asia/Kolkata');
    const week = await app.request('GET', `/api/v1/bookings/available-slots?chatInterfaceId=${deskId}&timeZone=eUROPE/bERLIN`, { token: a.token });
    expect(week.body.data).toMatchObject({ timeZone: 'Europe/Berlin', availabilityTimeZone: 'Asia/Kolkata' });
    expect(week.body.data.slots.length).toBeGreaterThan(0);
    for (const slot of week.body.data.slots) expect(slot.localStart).toMatch(/\+0[12]:00$/);
    const empty = await app.request('POST', '/api/v1/chat-interfaces', { token: a.token, body: { name: 'No hours' } });
    const bare = await app.request('GET', `/api/v1/bookings/available-slots?chatInterfaceId=${empty.body.data.chatInterface.id}&timeZone=utc`, {
      token: a.token,
    });
    expect(bare.body.data.timeZone).toBe('UTC');

    // The attendee's zone on a booking: stored, answered and mailed canonical.
    const booked = await app.request('POST', '/api/v1/bookings/manual', {
      token: a.token,
      body: {
        chatInterfaceId: deskId,
        start: '2027-05-03T10:00:00.000Z',
        end: '2027-05-03T10:30:00.000Z',
        attendee: { name: 'Ada', email: 'zones@example.com', timeZone: 'eUROPE/bERLIN' },
      },
    });
    expect(booked.status, booked.text).toBe(201);
    expect(booked.body.data.booking).toMatchObject({ localStart: '2027-05-03T12:00:00.000+02:00', attendee: { timeZone: 'Europe/Berlin' } });
    const bookingRow = await db.selectFrom('bookings').select('attendee_time_zone').where('id', '=', booked.body.data.booking.id).executeTakeFirstOrThrow();
    expect(bookingRow.attendee_time_zone).toBe('Europe/Berlin');
    const [mail] = await smtp.waitFor((m) => m.envelope.to.includes('zones@example.com'));
    expect(mail!.parsed.text).toContain('(Europe/Berlin)');

    // Rows written before names were canonicalised are answered canonical too.
    await db.updateTable('bookings').set({ attendee_time_zone: 'eUROPE/bERLIN' }).where('id', '=', booked.body.data.booking.id).execute();
    await db.updateTable('booking_availability').set({ time_zone: 'aSIA/kOLKATA' }).where('chat_interface_id', '=', deskId).execute();
    const listed = await app.request('GET', `/api/v1/bookings?chatInterfaceId=${deskId}`, { token: a.token });
    expect(listed.body.data.bookings[0].attendee.timeZone).toBe('Europe/Berlin');
    expect((await app.request('GET', `/api/v1/chat-interfaces/${deskId}/availability`, { token: a.token })).body.data.availability.timeZone).toBe(
      'Asia/Kolkata',
    );
    const legacy = await app.request('GET', `/api/v1/bookings/available-slots?chatInterfaceId=${deskId}`, { token: a.token });
    expect(legacy.body.data).toMatchObject({ timeZone: 'Asia/Kolkata', availabilityTimeZone: 'Asia/Kolkata' });
    expect(legacy.body.data.slots[0].localStart).toMatch(/\+05:30$/);
  });
});
