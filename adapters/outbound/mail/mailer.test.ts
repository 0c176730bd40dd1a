import ICAL from 'ical.js';
import type { Attachment } from 'mailparser';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSmtpServer, type TestSmtpServer } from '../../../test/helpers/smtp-server.ts';
import type { Logger } from '../logger.ts';
import { type CalendarInvite, calendarInvite } from './icalendar.ts';
import { createMailer, InvalidMailError, type Mailer } from './mailer.ts';

function recordingLogger() {
  const lines: Array<{ level: string; msg: string; fields?: Record<string, unknown> }> = [];
  const at =
    (level: string) =>
    (msg: string, fields?: Record<string, unknown>): void => {
      lines.push({ level, msg, fields });
    };
  const logger: Logger = { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') };
  return { logger, lines };
}

const invite: CalendarInvite = {
  method: 'REQUEST',
  uid: 'bk_42@chat-interface-service',
  sequence: 0,
  start: new Date('2030-05-06T14:00:00Z'),
  end: new Date('2030-05-06T14:45:00Z'),
  summary: 'Demo with Zoë; Q&A',
  description: 'Agenda:\n1. intro\n2. questions',
  location: 'https://meet.acme.test/abc',
  organizer: { name: 'Acme Bookings', email: 'bookings@acme.test' },
  attendees: [
    { name: 'Zoë Müller', email: 'zoe@example.test' },
    { name: 'Sam Lee', email: 'sam@example.test' },
  ],
  stamp: new Date('2030-05-01T08:00:00Z'),
};

function calendarPart(attachments: Attachment[]) {
  const part = attachments.find((a) => a.contentType === 'text/calendar');
  if (!part) throw new Error(`no text/calendar part among ${attachments.map((a) => a.contentType).join(', ')}`);
  const header = part.headers.get('content-type') as { value: string; params: Record<string, string> };
  const ics = part.content.toString('utf8');
  const calendar = new ICAL.Component(ICAL.parse(ics));
  const event = calendar.getFirstSubcomponent('vevent');
  if (!event) throw new Error('no VEVENT');
  return { params: header.params, calendar, event };
}

const email = (value: unknown) => String(value).replace(/^mailto:/i, '');

describe('mailer against a real SMTP server', () => {
  let smtp: TestSmtpServer;
  let mailer: Mailer;

  beforeAll(async () => {
    smtp = await startSmtpServer();
    mailer = createMailer({ smtpUrl: smtp.url, from: 'Acme Bookings <bookings@acme.test>', logger: recordingLogger().logger, timeoutMs: 5_000 });
  });
  afterAll(async () => {
    await mailer?.close();
    await smtp?.close();
  });

  it('delivers a REQUEST invitation that parses back with METHOD, UID, SEQUENCE, UTC times, organizer, attendees and STATUS', async () => {
    expect(mailer.enabled).toBe(true);
    const result = await mailer.send({
      to: ['zoe@example.test', 'sam@example.test'],
      subject: 'Invitation: Demo with Zoë',
      text: 'You are invited.',
      html: '<p>You are invited.</p>',
      replyTo: 'support@acme.test',
      calendar: { method: 'REQUEST', ics: calendarInvite(invite) },
    });
    expect(result.delivered).toBe(true);
    expect(result.messageId).toMatch(/^<.+@.+>$/);

    const [message] = await smtp.waitFor((m) => m.parsed.messageId === result.messageId);
    expect(message!.envelope.from).toBe('bookings@acme.test');
    expect(message!.envelope.to).toEqual(['zoe@example.test', 'sam@example.test']);
    expect(message!.parsed.subject).toBe('Invitation: Demo with Zoë');
    expect(message!.parsed.text?.trim()).toBe('You are invited.');
    expect(message!.parsed.replyTo?.value[0]?.address).toBe('support@acme.test');
    expect(message!.raw).toMatch(/Content-Type: text\/calendar; charset=utf-8; method=REQUEST/i);

    const { params, calendar, event } = calendarPart(message!.parsed.attachments);
    expect(params.method).toBe('REQUEST');
    expect(calendar.getFirstPropertyValue('method')).toBe('REQUEST');
    expect(calendar.getFirstPropertyValue('prodid')).toBe('-//chat-interface-service//bookings//EN');
    expect(event.getFirstPropertyValue('uid')).toBe('bk_42@chat-interface-service');
    expect(event.getFirstPropertyValue('sequence')).toBe(0);
    expect(event.getFirstPropertyValue('status')).toBe('CONFIRMED');
    expect(event.getFirstPropertyValue('summary')).toBe('Demo with Zoë; Q&A');
    expect(event.getFirstPropertyValue('description')).toBe('Agenda:\n1. intro\n2. questions');
    const start = event.getFirstPropertyValue('dtstart') as ICAL.Time;
    const end = event.getFirstPropertyValue('dtend') as ICAL.Time;
    expect(start.zone?.tzid).toBe('UTC');
    expect(end.zone?.tzid).toBe('UTC');
    expect(start.toJSDate().toISOString()).toBe('2030-05-06T14:00:00.000Z');
    expect(end.toJSDate().toISOString()).toBe('2030-05-06T14:45:00.000Z');
    const organizer = event.getFirstProperty('organizer')!;
    expect(email(organizer.getFirstValue())).toBe('bookings@acme.test');
    expect(organizer.getParameter('cn')).toBe('Acme Bookings');
    const attendees = event.getAllProperties('attendee');
    expect(attendees.map((a) => email(a.getFirstValue()))).toEqual(['zoe@example.test', 'sam@example.test']);
    expect(attendees.map((a) => a.getParameter('cn'))).toEqual(['Zoë Müller', 'Sam Lee']);
    for (const a of attendees) {
      expect(a.getParameter('role')).toBe('REQ-PARTICIPANT');
      expect(a.getParameter('partstat')).toBe('NEEDS-ACTION');
      expect(a.getParameter('rsvp')).toBe('TRUE');
    }
  });

  it('delivers a CANCEL with the same UID and SEQUENCE 1', async () => {
    const result = await mailer.send({
      to: ['zoe@example.test'],
      subject: 'Cancelled: Demo with Zoë',
      text: 'The booking was cancelled.',
      calendar: { method: 'CANCEL', ics: calendarInvite({ ...invite, method: 'CANCEL', sequence: 1 }) },
    });
    expect(result.delivered).toBe(true);
    const [message] = await smtp.waitFor((m) => m.parsed.messageId === result.messageId);
    expect(message!.raw).toMatch(/Content-Type: text\/calendar; charset=utf-8; method=CANCEL/i);
    const { params, calendar, event } = calendarPart(message!.parsed.attachments);
    expect(params.method).toBe('CANCEL');
    expect(calendar.getFirstPropertyValue('method')).toBe('CANCEL');
    expect(event.getFirstPropertyValue('uid')).toBe('bk_42@chat-interface-service');
    expect(event.getFirstPropertyValue('sequence')).toBe(1);
    expect(event.getFirstPropertyValue('status')).toBe('CANCELLED');
  });

  it('refuses CR/LF in the subject, recipients and reply-to, and a calendar whose METHOD disagrees', async () => {
    const before = smtp.messages.length;
    await expect(mailer.send({ to: ['zoe@example.test'], subject: 'Hi\r\nBcc: victim@evil.test', text: 'x' })).rejects.toThrow(/subject/);
    await expect(mailer.send({ to: ['zoe@example.test'], subject: 'Hi\nX-Evil: 1', text: 'x' })).rejects.toThrow(/subject/);
    await expect(mailer.send({ to: ['zoe@example.test\r\nBcc: victim@evil.test'], subject: 'Hi', text: 'x' })).rejects.toThrow(/recipient/);
    await expect(mailer.send({ to: ['zoe@example.test'], subject: 'Hi', text: 'x', replyTo: 'a@b.test\nBcc: c@d.test' })).rejects.toThrow(/reply-to/);
    await expect(mailer.send({ to: [], subject: 'Hi', text: 'x' })).rejects.toThrow(/recipient/);
    // Its own class, so a mail job can tell a message that will never go from a delivery worth retrying.
    await expect(mailer.send({ to: ['zoe@example.test'], subject: 'Hi\r\nBcc: victim@evil.test', text: 'x' })).rejects.toBeInstanceOf(InvalidMailError);
    await expect(
      mailer.send({ to: ['zoe@example.test'], subject: 'Hi', text: 'x', calendar: { method: 'CANCEL', ics: calendarInvite(invite) } }),
    ).rejects.toThrow(/METHOD/);
    expect(smtp.messages.length).toBe(before);
  });
});

describe('mailer error reporting', () => {
  it('rejects with the SMTP failure, never the password from the URL', async () => {
    const smtp = await startSmtpServer();
    const port = new URL(smtp.url).port;
    const mailer = createMailer({
      smtpUrl: `smtp://user:s3cret@127.0.0.1:${port}`,
      from: 'bookings@acme.test',
      logger: recordingLogger().logger,
      timeoutMs: 5_000,
    });
    try {
      smtp.failNext(1);
      const error = await mailer.send({ to: ['zoe@example.test'], subject: 'Hello', text: 'body' }).then(
        () => null,
        (err: unknown) => err,
      );
      expect(error).toBeInstanceOf(Error);
      const { message, stack } = error as Error;
      expect(message).toMatch(/451/);
      expect(message).not.toContain('s3cret');
      expect(String(stack)).not.toContain('s3cret');
      expect(JSON.stringify(error)).not.toContain('s3cret');
      expect(error).toMatchObject({ responseCode: 451, permanent: false });

      // The failure was temporary: the next attempt goes through (authenticated) on the same mailer.
      const retry = await mailer.send({ to: ['zoe@example.test'], subject: 'Hello again', text: 'body' });
      expect(retry.delivered).toBe(true);
      await smtp.waitFor((m) => m.parsed.subject === 'Hello again');
    } finally {
      await mailer.close();
      await smtp.close();
    }
  });

  it('delivers to the accepted recipients when only some are refused, and warns about the others', async () => {
    const smtp = await startSmtpServer();
    const { logger, lines } = recordingLogger();
    const mailer = createMailer({ smtpUrl: smtp.url, from: 'bookings@acme.test', logger, timeoutMs: 5_000 });
    try {
      // The first RCPT gets the 451, the second is accepted.
      smtp.failNext(1);
      await expect(mailer.send({ to: ['a@example.test', 'b@example.test'], subject: 'Partial', text: 'x' })).resolves.toMatchObject({ delivered: true });
      const [partial] = await smtp.waitFor((m) => m.parsed.subject === 'Partial');
      expect(partial!.envelope.to).toEqual(['b@example.test']);
      expect(lines.find((l) => l.level === 'warn')?.fields).toMatchObject({ rejected: ['a@example.test'], subject: 'Partial' });
    } finally {
      await mailer.close();
      await smtp.close();
    }
  });

  it('refuses a message after close() (a job finishing after shutdown) without opening a new connection', async () => {
    const smtp = await startSmtpServer();
    const mailer = createMailer({ smtpUrl: smtp.url, from: 'bookings@acme.test', logger: recordingLogger().logger, timeoutMs: 5_000 });
    try {
      await expect(mailer.send({ to: ['a@example.test'], subject: 'Before', text: 'x' })).resolves.toMatchObject({ delivered: true });
      await mailer.close();
      await expect(mailer.send({ to: ['a@example.test'], subject: 'After', text: 'x' })).rejects.toThrow(/mailer is closed/);
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect((await smtp.waitFor((m) => m.parsed.subject === 'Before')).length).toBe(1);
      expect(smtp.messages.some((m) => m.parsed.subject === 'After')).toBe(false);
    } finally {
      await smtp.close();
    }
  });
});

describe('mailer without SMTP_URL', () => {
  it('is disabled, logs recipients and subject (not the body) and reports delivered: false', async () => {
    const { logger, lines } = recordingLogger();
    const mailer = createMailer({ from: 'bookings@acme.test', logger });
    expect(mailer.enabled).toBe(false);
    const result = await mailer.send({
      to: ['zoe@example.test'],
      subject: 'Your booking',
      text: 'secret body text',
      html: '<p>secret body html</p>',
      calendar: { method: 'REQUEST', ics: calendarInvite(invite) },
    });
    expect(result).toEqual({ delivered: false, messageId: null });
    expect(lines).toHaveLength(1);
    expect(lines[0]!.fields).toMatchObject({ to: ['zoe@example.test'], subject: 'Your booking', calendar: 'REQUEST' });
    const logged = JSON.stringify(lines);
    expect(logged).not.toContain('secret body');
    expect(logged).not.toContain('BEGIN:VCALENDAR');
    await expect(mailer.send({ to: ['zoe@example.test'], subject: 'a\r\nb', text: 'x' })).rejects.toThrow(/subject/);
    await mailer.close();
  });

  it('treats an empty SMTP_URL as unset and refuses a non-SMTP URL', () => {
    expect(createMailer({ smtpUrl: '', from: 'a@b.test', logger: recordingLogger().logger }).enabled).toBe(false);
    expect(() => createMailer({ smtpUrl: 'http://user:s3cret@mail.test', from: 'a@b.test', logger: recordingLogger().logger })).toThrow(/smtp/);
    expect(() => createMailer({ smtpUrl: 'http://user:s3cret@mail.test', from: 'a@b.test', logger: recordingLogger().logger })).not.toThrow(/s3cret/);
  });
});
