import ICAL from 'ical.js';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { startSmtpServer, type TestSmtpServer } from '../helpers/smtp-server.ts';
import { startTestApp, type TestApp, type TestResponse } from '../helpers/test-app.ts';
import { startWebhookReceiver, verifyDelivery, type WebhookReceiver } from '../helpers/webhook-receiver.ts';

/**
 * Bookings' audit findings, through the real listener with a real SMTP server: deleting an interface cancels its
 * upcoming bookings (mail and event) and nothing deletes them silently, both judging "upcoming" by the database's
 * clock (a booking starting in seconds, the service's clock ahead), the caps on anonymous visitors' bookings,
 * the attendee's mail without the booker's free text, no reminder with BOOKING_REMINDER_MINUTES=0, the slot cap,
 * one-line phones and no manual bookings in the past.
 */

let app: TestApp;
let smtp: TestSmtpServer;
let receiver: WebhookReceiver;
let a: { token: string; ownerId: string; email: string };
let kb: string;

const DAY = 24 * 3600_000;
const allDay = [{ start: '00:00', end: '24:00' }];
const availability = {
  timeZone: 'UTC',
  weekly: Object.fromEntries(['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'].map((d) => [d, allDay])),
  slotMinutes: 30,
  minNoticeMinutes: 0,
  maxDaysAhead: 365,
};
/** A slot start on the half hour, `days` days from now. */
const slotIn = (days: number, extraMinutes = 0) => {
  const t = new Date(Date.now() + days * DAY);
  t.setUTCHours(10, extraMinutes, 0, 0);
  return t.toISOString();
};

/** The mail's calendar attachment as sent (every property: SUMMARY, DESCRIPTION, ATTENDEE's CN...). */
const calendarText = (mail: TestSmtpServer['messages'][number]) =>
  mail.parsed.attachments.find((att) => att.contentType.startsWith('text/calendar'))!.content.toString('utf8');

function calendarOf(mail: TestSmtpServer['messages'][number]) {
  const part = mail.parsed.attachments.find((att) => att.contentType.startsWith('text/calendar'));
  const calendar = new ICAL.Component(ICAL.parse(part!.content.toString('utf8')));
  const event = calendar.getFirstSubcomponent('vevent')!;
  return {
    method: calendar.getFirstPropertyValue('method'),
    uid: String(event.getFirstPropertyValue('uid')),
    sequence: Number(event.getFirstPropertyValue('sequence') ?? 0),
    description: String(event.getFirstPropertyValue('description') ?? ''),
  };
}

/** A public interface with booking hours whose knowledge base offers the booking tool. */
async function bookableInterface(name: string, hours: Record<string, unknown> = availability) {
  const created = await app.request('POST', '/api/v1/chat-interfaces', { token: a.token, body: { name, configId: kb, public: true } });
  expect(created.status, created.text).toBe(201);
  const iface = { id: created.body.data.chatInterface.id as string, slug: created.body.data.chatInterface.slug as string };
  const saved = await app.request('PUT', `/api/v1/chat-interfaces/${iface.id}/availability`, { token: a.token, body: hours });
  expect(saved.status, saved.text).toBe(200);
  return iface;
}

const visitorToken = async (slug: string) => (await app.request('POST', `/api/v1/chat/${slug}/visitor-sessions`, { body: {} })).body.data.token as string;
const visitorBook = (slug: string, token: string, start: string, extra: Record<string, unknown> = {}) =>
  app.request('POST', `/api/v1/chat/${slug}/bookings`, {
    token,
    body: { start, attendee: { name: 'Guest', email: 'guest@example.com' }, ...extra },
  });

beforeAll(async () => {
  smtp = await startSmtpServer();
  receiver = await startWebhookReceiver();
  app = await startTestApp({
    SMTP_URL: smtp.url,
    RATE_LIMIT_DEFAULT: '100000',
    RATE_LIMIT_VISITOR_SESSIONS: '1000',
    RATE_LIMIT_VISITOR_IP: '100000',
    BOOKINGS_PER_INTERFACE_HOUR: '5',
    OUTBOUND_ALLOW_HOSTS: receiver.hostPort,
    PUBLIC_ORIGINS: 'https://book.example',
  });
  a = await app.signUp('safe-a');
  kb = (await app.request('POST', '/api/v1/knowledge-base/configs', { token: a.token, body: { name: 'Bookings' } })).body.data.config.id;
  const tools = await app.request('PATCH', `/api/v1/knowledge-base/configs/${kb}/tools`, {
    token: a.token,
    body: { tools: [{ name: 'book_slot', enabled: true }] },
  });
  expect(tools.status, tools.text).toBe(200);
});
afterAll(async () => {
  await app?.stop();
  await smtp?.close();
  await receiver?.close();
});

describe('deleting an interface', () => {
  it('cancels its upcoming bookings first: the attendee gets METHOD:CANCEL (same UID, SEQUENCE 1), the owner booking.cancelled', async () => {
    await app.setOwner(a.ownerId, { plan: 'enterprise' });
    const hook = await app.request('POST', '/api/v1/enterprise/webhooks', { token: a.token, body: { url: receiver.url, events: ['booking.cancelled'] } });
    expect(hook.status, hook.text).toBe(201);
    const iface = await bookableInterface('Doomed desk');
    const booked = await app.request('POST', '/api/v1/bookings', {
      token: a.token,
      body: { chatInterfaceId: iface.id, start: slotIn(3), attendee: { name: 'Kept Waiting', email: 'doomed@example.com' } },
    });
    expect(booked.status, booked.text).toBe(201);
    const id = booked.body.data.booking.id as string;
    await smtp.waitFor((m) => m.envelope.to.includes('doomed@example.com') && m.parsed.subject?.startsWith('Confirmed:') === true);

    const deleted = await app.request('DELETE', `/api/v1/chat-interfaces/${iface.id}`, { token: a.token });
    expect(deleted.status, deleted.text).toBe(200);
    // The rows are gone (cascade), the mail still goes: it carries what it says.
    expect(await app.deps.database.db.selectFrom('bookings').select('id').where('id', '=', id).execute()).toEqual([]);
    const [cancel] = await smtp.waitFor((m) => m.envelope.to.includes('doomed@example.com') && m.parsed.subject?.startsWith('Cancelled:') === true);
    expect(calendarOf(cancel!)).toMatchObject({ method: 'CANCEL', uid: `${id}@chat-interface-service`, sequence: 1 });
    await smtp.waitFor((m) => m.envelope.to.includes(a.email) && m.parsed.subject?.startsWith('Cancelled: Doomed desk: Kept Waiting') === true);
    const [delivery] = await receiver.waitFor(1);
    expect(verifyDelivery(hook.body.data.secret, delivery!)).toMatchObject({
      type: 'booking.cancelled',
      data: { id, status: 'cancelled', cancelledBy: 'owner' },
    });
  });

  it('an interface with upcoming bookings is not deleted behind their back: an owner or interface deleted in SQL is refused', async () => {
    const iface = await bookableInterface('Guarded desk');
    const booked = await app.request('POST', '/api/v1/bookings', {
      token: a.token,
      body: { chatInterfaceId: iface.id, start: slotIn(4), attendee: { name: 'Guarded', email: 'guarded@example.com' } },
    });
    expect(booked.status, booked.text).toBe(201);
    const db = app.deps.database.db;
    await expect(sql`delete from chat_interfaces where id = ${iface.id}`.execute(db)).rejects.toThrow(/upcoming bookings/);
    await expect(sql`delete from owners where id = ${a.ownerId}`.execute(db)).rejects.toThrow(/upcoming bookings/);
    // Once cancelled, nothing holds it.
    await app.request('POST', `/api/v1/bookings/${booked.body.data.booking.id}/cancel`, { token: a.token, body: {} });
    await sql`delete from chat_interfaces where id = ${iface.id}`.execute(db);
  });

  it('a booking starting in seconds is judged by the database’s clock alone: SQL is refused, the API delete cancels it', async () => {
    const iface = await bookableInterface('Imminent desk');
    // It begins in 3 s and lasts a minute: upcoming, by the database's now(), until it ends.
    const start = new Date(Date.now() + 3_000);
    const booked = await app.request('POST', '/api/v1/bookings/manual', {
      token: a.token,
      body: {
        chatInterfaceId: iface.id,
        start: start.toISOString(),
        end: new Date(start.getTime() + 60_000).toISOString(),
        attendee: { name: 'Just In Time', email: 'imminent@example.com' },
      },
    });
    expect(booked.status, booked.text).toBe(201);
    const id = booked.body.data.booking.id as string;
    const db = app.deps.database.db;
    await expect(sql`delete from chat_interfaces where id = ${iface.id}`.execute(db)).rejects.toThrow(/upcoming bookings/);

    // The service's host runs ten minutes ahead of the database's (two hosts' clocks drift; exaggerated so that a
    // loaded machine cannot blur it): by the service's clock the booking is over, by the database's it is not. The
    // delete must cancel it, as the trigger counts it; choosing by the service's clock left it to the trigger: a 500.
    vi.useFakeTimers({ toFake: ['Date'], shouldAdvanceTime: true, now: Date.now() + 10 * 60_000 });
    let deleted: TestResponse;
    try {
      deleted = await app.request('DELETE', `/api/v1/chat-interfaces/${iface.id}`, { token: a.token });
    } finally {
      vi.useRealTimers();
    }
    expect(deleted.status, deleted.text).toBe(200);
    expect(deleted.body.data).toEqual({ deleted: true, id: iface.id });
    expect(await db.selectFrom('chat_interfaces').select('id').where('id', '=', iface.id).execute()).toEqual([]);
    expect(await db.selectFrom('bookings').select('id').where('id', '=', id).execute()).toEqual([]);
    // Cancelled in the deleting transaction, not dropped silently: the attendee's calendar hears of it.
    const [cancel] = await smtp.waitFor((m) => m.envelope.to.includes('imminent@example.com') && m.parsed.subject?.startsWith('Cancelled:') === true);
    expect(calendarOf(cancel!)).toMatchObject({ method: 'CANCEL', uid: `${id}@chat-interface-service`, sequence: 1 });
  });
});

describe('anonymous visitors’ bookings', () => {
  it('one visitor holds at most BOOKINGS_PER_VISITOR (3) upcoming bookings: the fourth is a 409', async () => {
    const iface = await bookableInterface('Capped desk');
    const token = await visitorToken(iface.slug);
    for (let i = 0; i < 3; i++) {
      const res = await visitorBook(iface.slug, token, slotIn(2 + i));
      expect(res.status, res.text).toBe(201);
    }
    const fourth = await visitorBook(iface.slug, token, slotIn(6));
    expect(fourth.status, fourth.text).toBe(409);
    expect(fourth.body.error).toMatchObject({ code: 'CONFLICT', message: 'Too many bookings' });
    // Another visitor is not held by the first one's bookings; the interface's hourly cap (5 here) then is.
    const other = await visitorToken(iface.slug);
    expect((await visitorBook(iface.slug, other, slotIn(7))).status).toBe(201);
    expect((await visitorBook(iface.slug, other, slotIn(8))).status).toBe(201);
    const third = await visitorToken(iface.slug);
    const refused = await visitorBook(iface.slug, third, slotIn(9));
    expect(refused.status, refused.text).toBe(429);
    expect(refused.body.error.code).toBe('RATE_LIMITED');
    expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0);
    // The owner's own bookings are not capped.
    const owner = await app.request('POST', '/api/v1/bookings', {
      token: a.token,
      body: { chatInterfaceId: iface.id, start: slotIn(10), attendee: { name: 'Phone', email: 'phone@example.com' } },
    });
    expect(owner.status, owner.text).toBe(201);
  });

  it('the attendee’s mail does not carry what the booker wrote (notes, the name in its subject); the owner’s does', async () => {
    const iface = await bookableInterface('Mail desk');
    const token = await visitorToken(iface.slug);
    const res = await visitorBook(iface.slug, token, slotIn(5), {
      attendee: { name: 'Win a prize at http://phish.example', email: 'stranger@example.com' },
      notes: 'Visit http://phish.example/login now',
    });
    expect(res.status, res.text).toBe(201);
    const [toStranger] = await smtp.waitFor((m) => m.envelope.to.includes('stranger@example.com') && m.parsed.subject?.startsWith('Confirmed:') === true);
    expect(toStranger!.parsed.subject).not.toContain('phish');
    expect(toStranger!.parsed.text).not.toContain('phish');
    expect(calendarText(toStranger!)).not.toContain('phish');
    const [toOwner] = await smtp.waitFor((m) => m.envelope.to.includes(a.email) && m.parsed.subject?.startsWith('New booking: Win a prize') === true);
    expect(toOwner!.parsed.text).toContain('Notes: Visit http://phish.example/login now');
    // Cancelled, the attendee's mail still says nothing of theirs.
    await app.request('POST', `/api/v1/bookings/${res.body.data.booking.id}/cancel`, { token: a.token, body: {} });
    const [cancel] = await smtp.waitFor((m) => m.envelope.to.includes('stranger@example.com') && m.parsed.subject?.startsWith('Cancelled:') === true);
    expect(`${cancel!.parsed.subject}\n${cancel!.parsed.text}\n${calendarText(cancel!)}`).not.toContain('phish');
  });
});

describe('reminders', () => {
  it('BOOKING_REMINDER_MINUTES=0 queues none (the default queues one)', async () => {
    const iface = await bookableInterface('Reminder desk');
    const peer = await app.startPeer({ BOOKING_REMINDER_MINUTES: '0' });
    const reminders = async (bookingId: string) =>
      (
        await sql<{ n: number }>`select count(*)::int as n from jobs where kind = 'booking.mail' and payload->>'bookingId' = ${bookingId}
          and payload->>'kind' = 'reminder'`.execute(app.deps.database.db)
      ).rows[0]!.n;
    try {
      const body = (start: string) => ({ chatInterfaceId: iface.id, start, attendee: { name: 'Ada', email: 'ada@example.com' } });
      const none = await peer.request('POST', '/api/v1/bookings', { token: a.token, body: body(slotIn(12)) });
      expect(none.status, none.text).toBe(201);
      expect(await reminders(none.body.data.booking.id)).toBe(0);
      const some = await app.request('POST', '/api/v1/bookings', { token: a.token, body: body(slotIn(13)) });
      expect(await reminders(some.body.data.booking.id)).toBe(1);
    } finally {
      await peer.stop();
    }
  });
});

describe('available slots', () => {
  it('answers at most 1,000 slots, earliest first, and says when there are more', async () => {
    const iface = await bookableInterface('Busy desk', { ...availability, slotMinutes: 5, intervalMinutes: 5 });
    const from = new Date(Date.now() + DAY);
    from.setUTCHours(0, 0, 0, 0);
    const to = new Date(from.getTime() + 61 * DAY);
    const res = await app.request(
      'GET',
      `/api/v1/bookings/available-slots?chatInterfaceId=${iface.id}&from=${from.toISOString()}&to=${to.toISOString()}&timeZone=America/New_York`,
      { token: a.token },
    );
    expect(res.status, res.text).toBe(200);
    expect(res.body.data.slots).toHaveLength(1000);
    expect(res.body.data.truncated).toBe(true);
    expect(res.body.data.slots[0].start).toBe(from.toISOString());
    const visitor = await app.request('GET', `/api/v1/chat/${iface.slug}/bookings/available-slots?from=${from.toISOString()}&to=${to.toISOString()}`, {
      token: await visitorToken(iface.slug),
    });
    expect(visitor.status, visitor.text).toBe(200);
    expect(visitor.body.data).toMatchObject({ truncated: true });
    expect(visitor.body.data.slots).toHaveLength(1000);
    // A day of them fits.
    const day = await app.request(
      'GET',
      `/api/v1/bookings/available-slots?chatInterfaceId=${iface.id}&from=${from.toISOString()}&to=${new Date(from.getTime() + DAY).toISOString()}`,
      { token: a.token },
    );
    expect(day.body.data.slots).toHaveLength(288);
    expect(day.body.data.truncated).toBe(false);
  });
});

describe('input', () => {
  it('a phone with a line break is a 400 naming attendee.phone', async () => {
    const iface = await bookableInterface('Phone desk');
    for (const phone of ['+49 30 1234\r\nBcc: victim@example.com', '+49\n30', '+49\t30']) {
      const res = await app.request('POST', '/api/v1/bookings', {
        token: a.token,
        body: { chatInterfaceId: iface.id, start: slotIn(14), attendee: { name: 'Ada', email: 'ada@example.com', phone } },
      });
      expect(res.status, phone).toBe(400);
      expect(res.body.error.details).toContain('attendee.phone');
    }
    const fine = await app.request('POST', '/api/v1/bookings', {
      token: a.token,
      body: { chatInterfaceId: iface.id, start: slotIn(14), attendee: { name: 'Ada', email: 'ada@example.com', phone: '+49 30 1234' } },
    });
    expect(fine.status, fine.text).toBe(201);
  });

  it('a manual booking that starts in the past is a 400 and mails nothing', async () => {
    const iface = await bookableInterface('Past desk');
    const before = smtp.messages.length;
    const hourAgo = new Date(Date.now() - 3600_000);
    for (const [start, end] of [
      ['1970-01-01T10:00:00Z', '1970-01-01T11:00:00Z'],
      [hourAgo.toISOString(), new Date(hourAgo.getTime() + 2 * 3600_000).toISOString()],
    ]) {
      const res = await app.request('POST', '/api/v1/bookings/manual', {
        token: a.token,
        body: { chatInterfaceId: iface.id, start, end, attendee: { name: 'Ada', email: 'past@example.com' } },
      });
      expect(res.status, res.text).toBe(400);
      expect(res.body.error).toMatchObject({ code: 'VALIDATION_FAILED', details: 'start: must not be in the past' });
    }
    expect(await app.deps.database.db.selectFrom('bookings').select('id').where('chat_interface_id', '=', iface.id).execute()).toEqual([]);
    await new Promise((r) => setTimeout(r, 200));
    expect(smtp.messages.slice(before).some((m) => m.envelope.to.includes('past@example.com'))).toBe(false);
  });
});
