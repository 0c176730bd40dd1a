import ical, { ICalAttendeeRole, ICalAttendeeStatus, ICalCalendarMethod, ICalEventStatus } from 'ical-generator';

/** One booking's calendar invitation (iTIP, RFC 5546): the first REQUEST, its updates (higher SEQUENCE) and the CANCEL, all with the same UID. */
export interface CalendarInvite {
  method: 'REQUEST' | 'CANCEL';
  /** Stable per booking, e.g. `${bookingId}@chat-interface-service`: calendar apps match updates and cancellations by it. */
  uid: string;
  /** 0 for the first REQUEST, higher for each update or cancellation. */
  sequence: number;
  /** Written in UTC (`DTSTART:20250101T090000Z`). */
  start: Date;
  end: Date;
  summary: string;
  description?: string;
  location?: string;
  url?: string;
  organizer: { name: string; email: string };
  attendees: Array<{ name: string; email: string }>;
  /** DTSTAMP, default now. */
  stamp?: Date;
}

/** The .ics text (CRLF line endings, folded at 75 octets, text values escaped by ical-generator). */
export function calendarInvite(invite: CalendarInvite): string {
  if (!Number.isInteger(invite.sequence) || invite.sequence < 0) throw new RangeError('calendar invite: sequence must be a non-negative integer');
  if (!(invite.end.getTime() > invite.start.getTime())) throw new RangeError('calendar invite: end must be after start');
  // UID, URL and addresses are written as they are (only TEXT values and parameters are escaped), so a line break there would inject properties.
  for (const [field, value] of [
    ['uid', invite.uid],
    ['url', invite.url ?? ''],
    ['organizer email', invite.organizer.email],
    ...invite.attendees.map((a) => ['attendee email', a.email] as const),
  ] as const) {
    if (/[\x00-\x1f\x7f]/.test(value)) throw new Error(`calendar invite: ${field} must not contain control characters`);
  }
  if (!invite.uid.trim()) throw new Error('calendar invite: uid is required');
  const cancel = invite.method === 'CANCEL';
  // ical-generator writes `PRODID:-` + its value: -//chat-interface-service//bookings//EN.
  const calendar = ical({
    prodId: { company: 'chat-interface-service', product: 'bookings', language: 'EN' },
    method: cancel ? ICalCalendarMethod.CANCEL : ICalCalendarMethod.REQUEST,
  });
  calendar.createEvent({
    id: invite.uid,
    sequence: invite.sequence,
    stamp: invite.stamp ?? new Date(),
    start: invite.start,
    end: invite.end,
    summary: invite.summary,
    description: invite.description ?? null,
    location: invite.location ?? null,
    // ical-generator TEXT-escapes the URI value (`\\;`), which RFC 5545 does not allow for URIs: percent-encode those characters instead.
    url: invite.url ? invite.url.replace(/[;,\\]/g, (c) => encodeURIComponent(c)) : null,
    status: cancel ? ICalEventStatus.CANCELLED : ICalEventStatus.CONFIRMED,
    organizer: { name: invite.organizer.name, email: invite.organizer.email },
    attendees: invite.attendees.map((a) => ({
      name: a.name,
      email: a.email,
      role: ICalAttendeeRole.REQ,
      status: ICalAttendeeStatus.NEEDSACTION,
      rsvp: true,
    })),
  });
  return calendar.toString();
}
