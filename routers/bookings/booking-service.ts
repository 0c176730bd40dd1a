import { createHash, randomUUID } from 'node:crypto';
import type { Transaction } from 'kysely';
import type { DB } from '../../db/types.ts';
import { isExclusionViolation } from '../../db/errors.ts';
import { AppError } from '../../schema/errors.ts';
import type { AppDeps } from '../context.ts';
import { webhookEvent, withEvents } from '../webhooks/outbox.ts';
import { bookingMailFacts, queueBookingMail, queueReminder } from './mail.ts';
import * as repo from './repository.ts';
import { type Availability, conflicts, freeSlots, isFreeSlot, localIso, storedZone } from './slots.ts';

type Deps = Pick<AppDeps, 'database' | 'webhookJobs' | 'mailJobs' | 'secrets' | 'config'>;

export interface AttendeeInput {
  name: string;
  email: string;
  phone?: string | undefined;
  timeZone?: string | undefined;
}

export function toAvailability(row: repo.AvailabilityRow): Availability {
  return {
    timeZone: storedZone(row.time_zone),
    weekly: row.weekly as Availability['weekly'],
    overrides: row.overrides as Availability['overrides'],
    slotMinutes: row.slot_minutes,
    intervalMinutes: row.interval_minutes,
    bufferBeforeMinutes: row.buffer_before_minutes,
    bufferAfterMinutes: row.buffer_after_minutes,
    minNoticeMinutes: row.min_notice_minutes,
    maxDaysAhead: row.max_days_ahead,
    maxPerDay: row.max_per_day,
  };
}

export function toBooking(row: repo.BookingRow) {
  const attendeeZone = storedZone(row.attendee_time_zone);
  return {
    id: row.id,
    chatInterfaceId: row.chat_interface_id,
    status: row.status,
    source: row.source,
    start: row.start_at.toISOString(),
    end: row.end_at.toISOString(),
    localStart: localIso(row.start_at, attendeeZone),
    exclusive: row.exclusive,
    attendee: { name: row.attendee_name, email: row.attendee_email, phone: row.attendee_phone, timeZone: attendeeZone },
    notes: row.notes,
    sessionId: row.session_id,
    cancelReason: row.cancel_reason,
    cancelledBy: row.cancelled_by,
    cancelledAt: row.cancelled_at ? row.cancelled_at.toISOString() : null,
    createdAt: row.created_at.toISOString(),
  };
}

/**
 * The origin the attendee's links point at: only the configured public one, or none (no link in the mail). The
 * request's Host is not trusted here: anyone could send one naming their own site and have the service mail that
 * link to a victim.
 */
export const linkOriginOf = (ctx: { deps: Pick<AppDeps, 'config'> }) => ctx.deps.config.PUBLIC_ORIGINS[0] ?? null;

/**
 * The attendee's cancellation token is derived from the booking id with the service's key, so the mail job can
 * rebuild the link without the token ever being stored; the database keeps only its hash for the lookup.
 */
export const cancelTokenOf = (deps: Pick<AppDeps, 'secrets'>, bookingId: string) => `bkc_${deps.secrets.sign('booking-cancel', bookingId)}`;
export const hashCancelToken = (token: string) => createHash('sha256').update(token).digest('hex');

const slotTaken = () =>
  new AppError('CONFLICT', 'Slot not available', 'The requested time is not a free slot (taken, outside the hours, or too soon); ask available-slots again');
export const DAY_MS = 24 * 3600_000;

/**
 * The free slots of an interface in [from, to): its exclusive bookings around the window (two days either side,
 * for buffers and the day cap) taken from the availability's slots.
 */
export async function freeSlotsOf(deps: Pick<AppDeps, 'database'>, chatInterfaceId: string, availability: Availability, window: { from: Date; to: Date }) {
  const busy = await repo.busyBetween(
    deps.database.db,
    chatInterfaceId,
    new Date(window.from.getTime() - 2 * DAY_MS),
    new Date(window.to.getTime() + 2 * DAY_MS),
  );
  return freeSlots(
    availability,
    busy.map((b) => ({ start: b.start_at, end: b.end_at })),
    window,
    new Date(),
  );
}

export interface VisitorCaps {
  /** Confirmed bookings not yet started that one visitor may hold on the interface. */
  livePerVisitor: number;
  /** Bookings visitors may make on the interface in an hour, whoever they are (new visitor tokens are cheap). */
  perInterfaceHour: number;
}

const HOUR_MS = 3600_000;

/** Checked under the interface's lock, so concurrent requests cannot all pass on the same count. */
async function checkVisitorCaps(trx: Transaction<DB>, chatInterfaceId: string, visitorId: string, caps: VisitorCaps) {
  const now = new Date();
  if ((await repo.countLiveVisitorBookings(trx, chatInterfaceId, visitorId, now)) >= caps.livePerVisitor) {
    throw new AppError('CONFLICT', 'Too many bookings', `A visitor may hold at most ${caps.livePerVisitor} upcoming bookings here; cancel one to book another`);
  }
  const recent = await repo.chatBookingTimesSince(trx, chatInterfaceId, new Date(now.getTime() - HOUR_MS));
  if (recent.length >= caps.perInterfaceHour) {
    // A place frees when the oldest booking of the hour leaves it.
    const retryAfter = Math.max(1, Math.ceil((recent[recent.length - caps.perInterfaceHour]!.created_at.getTime() + HOUR_MS - now.getTime()) / 1000));
    throw new AppError(
      'RATE_LIMITED',
      'Rate limit exceeded',
      `This chat interface takes at most ${caps.perInterfaceHour} bookings from visitors per hour; retry after ${retryAfter} s`,
      { 'Retry-After': String(retryAfter) },
    );
  }
}

export interface NewBooking {
  ownerId: string;
  chatInterfaceId: string;
  start: Date;
  /** Manual bookings give their end; others last the availability's slot length. */
  end?: Date;
  attendee: AttendeeInput;
  notes?: string | undefined;
  source: 'api' | 'manual' | 'chat';
  /** Manual only: skip the availability rules (still no overlap unless allowOverlap). */
  outsideRules?: boolean;
  allowOverlap?: boolean;
  visitorId?: string | null;
  /** A visitor's booking (anonymous, to an unverified address): the caps that bound the mail it can cause. */
  visitorCaps?: VisitorCaps;
  sessionId?: string | null;
  /** The origin the attendee's cancellation link points at. */
  linkOrigin: string | null;
}

/**
 * Books under the interface's lock: the availability rules (or, for manual bookings, only the overlap check)
 * are judged against a stable set of bookings, and the exclusion constraint rejects an exact overlap whatever
 * happens. Mails and the reminder are queued in the same transaction, so a booking never exists without them.
 */
export async function createBooking(deps: Deps, input: NewBooking) {
  const id = randomUUID();
  const tokenHash = hashCancelToken(cancelTokenOf(deps, id));
  try {
    return await withEvents(
      deps,
      async (trx) => {
        await repo.lockInterfaceBookings(trx, input.chatInterfaceId);
        if (input.visitorCaps && input.visitorId) await checkVisitorCaps(trx, input.chatInterfaceId, input.visitorId, input.visitorCaps);
        const availabilityRow = await repo.findAvailability(trx, input.chatInterfaceId);
        if (!availabilityRow && !input.outsideRules) {
          throw new AppError('CONFLICT', 'No availability', 'This chat interface has no booking hours yet (PUT .../availability)');
        }
        const availability = availabilityRow ? toAvailability(availabilityRow) : undefined;
        const end = input.end ?? new Date(input.start.getTime() + availability!.slotMinutes * 60_000);
        const busy = (
          await repo.busyBetween(trx, input.chatInterfaceId, new Date(input.start.getTime() - 2 * DAY_MS), new Date(end.getTime() + 2 * DAY_MS))
        ).map((b) => ({ start: b.start_at, end: b.end_at }));
        if (input.outsideRules) {
          const noBuffers = { bufferBeforeMinutes: 0, bufferAfterMinutes: 0 };
          if (!input.allowOverlap && conflicts(noBuffers, input.start, end, busy)) {
            throw new AppError('CONFLICT', 'Overlapping booking', 'Another booking overlaps this time; pass allowOverlap: true to book it anyway');
          }
        } else if (!isFreeSlot(availability!, busy, input.start, new Date())) {
          throw slotTaken();
        }
        const row = await repo.insertBooking(trx, {
          id,
          owner_id: input.ownerId,
          chat_interface_id: input.chatInterfaceId,
          status: 'confirmed',
          source: input.source,
          start_at: input.start,
          end_at: end,
          exclusive: !input.allowOverlap,
          attendee_name: input.attendee.name,
          attendee_email: input.attendee.email,
          attendee_phone: input.attendee.phone ?? null,
          attendee_time_zone: input.attendee.timeZone ?? availability?.timeZone ?? 'UTC',
          notes: input.notes ?? null,
          visitor_id: input.visitorId ?? null,
          session_id: input.sessionId ?? null,
          cancel_token_hash: tokenHash,
        });
        await queueBookingMail(deps, trx, { bookingId: id, kind: 'confirmation', linkOrigin: input.linkOrigin });
        await queueReminder(deps, trx, row, input.linkOrigin);
        return row;
      },
      (row) => [webhookEvent(row.owner_id, 'booking.created', toBooking(row))],
    );
  } catch (error) {
    // The constraint speaks when two instances (or the lock's absence) let an overlap through to the insert.
    if (isExclusionViolation(error)) throw slotTaken();
    throw error;
  } finally {
    deps.mailJobs.notify();
  }
}

type CancelChange = { reason: string | null; by: 'owner' | 'attendee'; linkOrigin: string | null };

/**
 * Cancels a confirmed booking in the caller's transaction: the reminder (and a confirmation not yet sent) go, and
 * the cancellation is queued carrying what it says, so it is sent even once the rows are deleted. Undefined when it
 * was not confirmed.
 */
async function cancelInTransaction(deps: Pick<Deps, 'mailJobs'>, trx: Transaction<DB>, bookingId: string, change: CancelChange) {
  const row = await repo.cancelBooking(trx, bookingId, change);
  if (!row) return undefined;
  await deps.mailJobs.cancel('bookingId', [row.id], trx);
  const facts = await bookingMailFacts(trx, row);
  if (facts) await queueBookingMail(deps, trx, { bookingId: row.id, kind: 'cancellation', linkOrigin: change.linkOrigin, facts });
  return row;
}

/** Cancels once; a second cancel answers the cancelled booking unchanged (idempotent). */
export async function cancelBooking(deps: Deps, booking: repo.BookingRow, change: CancelChange) {
  const cancelled = await withEvents(
    deps,
    (trx) => cancelInTransaction(deps, trx, booking.id, change),
    (row) => (row ? [webhookEvent(row.owner_id, 'booking.cancelled', toBooking(row))] : []),
  );
  deps.mailJobs.notify();
  return cancelled ?? (await repo.findBooking(deps.database.db, booking.id))!;
}

/**
 * Before an interface is deleted (its bookings go with it, by cascade), its upcoming confirmed bookings are cancelled
 * as the owner's cancel does, in the deleting transaction: the attendees get the calendar cancellation and the owner
 * `booking.cancelled` (record the returned rows' events in the same transaction). Under the interface's lock, so a
 * booking made meanwhile is either cancelled here or refused by the delete.
 */
export async function cancelUpcomingOfInterface(
  deps: Pick<Deps, 'mailJobs'>,
  trx: Transaction<DB>,
  owner: { ownerId: string; chatInterfaceId: string },
  linkOrigin: string | null,
) {
  await repo.lockInterfaceBookings(trx, owner.chatInterfaceId);
  const cancelled: repo.BookingRow[] = [];
  for (const id of await repo.upcomingBookingIds(trx, owner.ownerId, owner.chatInterfaceId)) {
    const row = await cancelInTransaction(deps, trx, id, { reason: null, by: 'owner', linkOrigin });
    if (row) cancelled.push(row);
  }
  return cancelled;
}
