import type { Kysely, Transaction } from 'kysely';
import type { DB } from '../../db/types.ts';
import { headerText } from '../../adapters/outbound/mail/header-text.ts';
import { calendarInvite } from '../../adapters/outbound/mail/icalendar.ts';
import { InvalidMailError } from '../../adapters/outbound/mail/mailer.ts';
import { findOwnerById } from '../auth/repository.ts';
import { findOwnedInterface } from '../chat-interfaces/repository.ts';
import type { AppDeps } from '../context.ts';
import { CountedAttemptError, type JobHandler, PermanentJobError } from '../jobs/handler.ts';
import * as repo from './repository.ts';
import { storedZone } from './slots.ts';

export const BOOKING_MAIL_JOB = 'booking.mail';
type MailKind = 'confirmation' | 'cancellation' | 'reminder';
type Recipient = 'attendee' | 'owner';
/**
 * Everything a booking mail says. A cancellation carries it in its job, taken when it is queued: the booking, its
 * interface or its owner may be deleted before the mail goes (deleting an interface cancels its bookings, then
 * deletes them), and the attendee must still learn the meeting is off.
 */
export interface BookingMailFacts {
  bookingId: string;
  ownerEmail: string;
  interfaceName: string;
  ownerTimeZone: string;
  attendeeName: string;
  attendeeEmail: string;
  attendeePhone: string | null;
  attendeeTimeZone: string;
  start: string;
  end: string;
  sequence: number;
  notes: string | null;
  cancelReason: string | null;
}
interface BookingMailPayload {
  bookingId: string;
  kind: MailKind;
  recipient: Recipient;
  linkOrigin: string | null;
  /** Cancellations (jobs queued before facts were carried have none: those read the rows). */
  facts?: BookingMailFacts;
}
/** SMTP outages are retried with the queue's backoff for about a day before the job is dead. */
const MAIL_ATTEMPTS = 10;

/** What the mail about a booking says, read from its rows; undefined when its interface or owner is gone. */
export async function bookingMailFacts(db: Kysely<DB> | Transaction<DB>, booking: repo.BookingRow): Promise<BookingMailFacts | undefined> {
  const owner = await findOwnerById(db, booking.owner_id);
  const iface = await findOwnedInterface(db, booking.owner_id, booking.chat_interface_id);
  if (!owner || !iface) return undefined;
  return {
    bookingId: booking.id,
    ownerEmail: owner.email,
    interfaceName: iface.name,
    ownerTimeZone: storedZone((await repo.findAvailability(db, booking.chat_interface_id))?.time_zone ?? 'UTC'),
    attendeeName: booking.attendee_name,
    attendeeEmail: booking.attendee_email,
    attendeePhone: booking.attendee_phone,
    attendeeTimeZone: storedZone(booking.attendee_time_zone),
    start: booking.start_at.toISOString(),
    end: booking.end_at.toISOString(),
    sequence: booking.sequence,
    notes: booking.notes,
    cancelReason: booking.cancel_reason,
  };
}

/** One job per recipient, so a retry never sends a mail that already went. */
export async function queueBookingMail(
  deps: Pick<AppDeps, 'mailJobs'>,
  trx: Transaction<DB> | Kysely<DB>,
  mail: { bookingId: string; kind: Exclude<MailKind, 'reminder'>; linkOrigin: string | null; facts?: BookingMailFacts },
) {
  for (const recipient of ['attendee', 'owner'] as const) {
    await deps.mailJobs.enqueue(
      BOOKING_MAIL_JOB,
      { ...mail, recipient } satisfies BookingMailPayload,
      {
        dedupeKey: `booking-mail:${mail.bookingId}:${mail.kind}:${recipient}`,
        maxAttempts: MAIL_ATTEMPTS,
      },
      trx,
    );
  }
}

/** The attendee's reminder, BOOKING_REMINDER_MINUTES before the start; none when that moment has passed, or with 0. */
export async function queueReminder(deps: Pick<AppDeps, 'mailJobs' | 'config'>, trx: Transaction<DB>, booking: repo.BookingRow, linkOrigin: string | null) {
  // 0 means no reminders (README, config), not one at the meeting's start.
  if (deps.config.BOOKING_REMINDER_MINUTES === 0) return;
  const runAt = new Date(booking.start_at.getTime() - deps.config.BOOKING_REMINDER_MINUTES * 60_000);
  if (runAt.getTime() <= Date.now() + 60_000) return;
  await deps.mailJobs.enqueue(
    BOOKING_MAIL_JOB,
    { bookingId: booking.id, kind: 'reminder', recipient: 'attendee', linkOrigin } satisfies BookingMailPayload,
    { dedupeKey: `booking-mail:${booking.id}:reminder`, maxAttempts: MAIL_ATTEMPTS, runAt },
    trx,
  );
}

const readable = (instant: Date, timeZone: string) =>
  `${new Intl.DateTimeFormat('en-GB', { timeZone, dateStyle: 'full', timeStyle: 'short' }).format(instant)} (${timeZone})`;

/** The cancellation page reads the token from the fragment, which browsers never send to a server or a referrer. */
const cancelLink = (origin: string | null, token: string) => (origin ? `${origin}/bookings/cancel#${token}` : null);

export function bookingMailJobHandlers(deps: AppDeps, cancelTokenOf: (bookingId: string) => string): Record<string, JobHandler> {
  return {
    [BOOKING_MAIL_JOB]: async (job, ctx) => {
      const { bookingId, kind, recipient, linkOrigin, facts: carried } = job.payload as BookingMailPayload;
      let facts = carried;
      if (!facts) {
        const booking = await repo.findBooking(deps.database.db, bookingId);
        if (!booking) return;
        if (kind !== 'cancellation' && booking.status !== 'confirmed') return;
        facts = await bookingMailFacts(deps.database.db, booking);
        if (!facts) return;
      }
      const start = new Date(facts.start);
      const end = new Date(facts.end);
      const zone = recipient === 'attendee' ? facts.attendeeTimeZone : facts.ownerTimeZone;
      const when = readable(start, zone);
      const link = cancelLink(linkOrigin, cancelTokenOf(facts.bookingId));
      // Both names go into the subject and the invitation's display names: folded to one line, so a row stored
      // before inputs were checked for line breaks cannot fail this mail on every attempt.
      const ifaceName = headerText(facts.interfaceName);
      const attendeeName = headerText(facts.attendeeName);
      // The attendee's address is not verified (anyone may book for anyone), so what a booker wrote (the notes,
      // the name in a subject) goes only to the owner; the attendee's mail is the owner's words and ours.
      const toAttendee = recipient === 'attendee';
      const summary = toAttendee ? ifaceName : `${ifaceName}: ${attendeeName}`;
      const to = toAttendee ? facts.attendeeEmail : facts.ownerEmail;
      const phone = facts.attendeePhone ? `, ${headerText(facts.attendeePhone)}` : '';
      const lines = [
        `When: ${when}, ${Math.round((end.getTime() - start.getTime()) / 60_000)} minutes`,
        `With: ${toAttendee ? ifaceName : `${attendeeName} <${facts.attendeeEmail}>${phone}`}`,
        ...(facts.notes && !toAttendee ? [`Notes: ${facts.notes}`] : []),
        ...(facts.cancelReason && kind === 'cancellation' ? [`Reason: ${facts.cancelReason}`] : []),
      ];
      const subject =
        kind === 'confirmation'
          ? recipient === 'attendee'
            ? `Confirmed: ${ifaceName}, ${when}`
            : `New booking: ${attendeeName}, ${when}`
          : kind === 'cancellation'
            ? `Cancelled: ${summary}, ${when}`
            : `Reminder: ${ifaceName}, ${when}`;
      const footer = recipient === 'attendee' && kind !== 'cancellation' && link ? [``, `To cancel: ${link}`] : [];
      const invite =
        kind === 'reminder'
          ? undefined
          : {
              method: kind === 'confirmation' ? ('REQUEST' as const) : ('CANCEL' as const),
              ics: calendarInvite({
                method: kind === 'confirmation' ? 'REQUEST' : 'CANCEL',
                uid: `${facts.bookingId}@chat-interface-service`,
                sequence: facts.sequence,
                start,
                end,
                summary,
                description: lines.join('\n'),
                organizer: { name: ifaceName, email: facts.ownerEmail },
                // The booker's name is their own text: a stranger's calendar shows only the address it was sent to.
                attendees: [{ name: toAttendee ? facts.attendeeEmail : attendeeName, email: facts.attendeeEmail }],
              }),
            };
      // Stopped before the send began: the job goes back uncounted.
      ctx.signal.throwIfAborted();
      try {
        await deps.mailer.send(
          {
            to: [to],
            subject,
            text: [...lines, ...footer].join('\n'),
            ...(toAttendee ? { replyTo: facts.ownerEmail } : {}),
            ...(invite ? { calendar: invite } : {}),
          },
          { signal: ctx.signal },
        );
      } catch (error) {
        // A message the mailer refuses is refused on every attempt: dead at once rather than retried for a day.
        if (error instanceof InvalidMailError) throw new PermanentJobError(error.message, { cause: error });
        // A send the stop cut short counts: a server that stalls every send would otherwise outlive every restart.
        if (ctx.signal.aborted) throw new CountedAttemptError(error instanceof Error ? error.message : String(error), { cause: error });
        throw error;
      }
    },
  };
}
