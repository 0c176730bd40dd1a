import ICAL from 'ical.js';
import { describe, expect, it } from 'vitest';
import { type CalendarInvite, calendarInvite } from './icalendar.ts';

const base: CalendarInvite = {
  method: 'REQUEST',
  uid: 'bk_123@chat-interface-service',
  sequence: 0,
  start: new Date('2030-03-01T09:00:00Z'),
  end: new Date('2030-03-01T09:30:00Z'),
  summary: 'Intro call',
  organizer: { name: 'Acme Support', email: 'support@acme.test' },
  attendees: [{ name: 'Zoë Müller', email: 'zoe@example.test' }],
  stamp: new Date('2030-01-01T00:00:00Z'),
};

function parse(ics: string) {
  const calendar = new ICAL.Component(ICAL.parse(ics));
  const event = calendar.getFirstSubcomponent('vevent');
  if (!event) throw new Error('no VEVENT');
  return { calendar, event };
}

describe('calendarInvite', () => {
  it('writes a REQUEST with UTC times, product id, status and attendee parameters', () => {
    const ics = calendarInvite(base);
    expect(ics).toMatch(/^BEGIN:VCALENDAR\r\n/);
    expect(ics).toContain('PRODID:-//chat-interface-service//bookings//EN\r\n');
    expect(ics).toContain('DTSTART:20300301T090000Z\r\n');
    expect(ics).toContain('DTEND:20300301T093000Z\r\n');
    expect(ics).toContain('DTSTAMP:20300101T000000Z\r\n');
    const { calendar, event } = parse(ics);
    expect(calendar.getFirstPropertyValue('method')).toBe('REQUEST');
    expect(event.getFirstPropertyValue('uid')).toBe(base.uid);
    expect(event.getFirstPropertyValue('sequence')).toBe(0);
    expect(event.getFirstPropertyValue('status')).toBe('CONFIRMED');
    const attendee = event.getFirstProperty('attendee')!;
    expect(attendee.getParameter('role')).toBe('REQ-PARTICIPANT');
    expect(attendee.getParameter('partstat')).toBe('NEEDS-ACTION');
    expect(attendee.getParameter('rsvp')).toBe('TRUE');
    expect(attendee.getParameter('cn')).toBe('Zoë Müller');
    expect(String(attendee.getFirstValue()).toLowerCase()).toBe('mailto:zoe@example.test');
  });

  it('escapes text so a summary with , ; newline and non-ASCII round-trips', () => {
    const summary = 'Call, with Zoë; agenda\nline two \\ done';
    const ics = calendarInvite({
      ...base,
      summary,
      description: 'First; second, third\r\nfourth',
      location: 'Room 1; Floor 2, Zürich',
      url: 'https://acme.test/bookings/bk_123?x=1;y=2',
      organizer: { name: 'Acme "Support"; Team, Inc', email: 'support@acme.test' },
      attendees: [
        { name: 'Zoë, Müller; Jr', email: 'zoe@example.test' },
        { name: 'Bob', email: 'bob@example.test' },
      ],
    });
    // Every line is CRLF-terminated; no raw newline from the summary leaks into the structure.
    expect(ics.split('\r\n').every((line) => !line.includes('\n'))).toBe(true);
    const { event } = parse(ics);
    expect(event.getFirstPropertyValue('summary')).toBe(summary);
    expect(event.getFirstPropertyValue('description')).toBe('First; second, third\nfourth');
    expect(event.getFirstPropertyValue('location')).toBe('Room 1; Floor 2, Zürich');
    // URI values are not TEXT-escaped: ';' and ',' are percent-encoded instead.
    expect(event.getFirstPropertyValue('url')).toBe('https://acme.test/bookings/bk_123?x=1%3By=2');
    expect(event.getFirstProperty('organizer')!.getParameter('cn')).toBe('Acme "Support"; Team, Inc');
    const attendees = event.getAllProperties('attendee');
    expect(attendees.map((a) => a.getParameter('cn'))).toEqual(['Zoë, Müller; Jr', 'Bob']);
    expect(attendees.map((a) => String(a.getFirstValue()).replace(/^mailto:/i, ''))).toEqual(['zoe@example.test', 'bob@example.test']);
  });

  it('writes a CANCEL with STATUS:CANCELLED and the given sequence', () => {
    const { calendar, event } = parse(calendarInvite({ ...base, method: 'CANCEL', sequence: 1 }));
    expect(calendar.getFirstPropertyValue('method')).toBe('CANCEL');
    expect(event.getFirstPropertyValue('status')).toBe('CANCELLED');
    expect(event.getFirstPropertyValue('sequence')).toBe(1);
    expect(event.getFirstPropertyValue('uid')).toBe(base.uid);
  });

  it('refuses line breaks in unescaped values and nonsense times', () => {
    expect(() => calendarInvite({ ...base, uid: 'x\r\nATTENDEE:mailto:evil@x.test' })).toThrow();
    expect(() => calendarInvite({ ...base, attendees: [{ name: 'E', email: 'e@x.test\nX-EVIL:1' }] })).toThrow();
    expect(() => calendarInvite({ ...base, url: 'https://x.test/\r\nX-EVIL:1' })).toThrow();
    expect(() => calendarInvite({ ...base, end: base.start })).toThrow();
    expect(() => calendarInvite({ ...base, sequence: -1 })).toThrow();
  });
});
