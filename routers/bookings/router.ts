import { z } from 'zod';
import { idParam, namesNothing, parseCalendarInstant, timestamp } from '../../schema/common.ts';
import { AppError } from '../../schema/errors.ts';
import {
  attendeeCancelInput,
  availabilityInput,
  availabilitySchema,
  availableSlotsInput,
  bookingSchema,
  cancelBookingInput,
  createBookingInput,
  listBookingsInput,
  manualBookingInput,
  slotSchema,
} from '../../schema/bookings.ts';
import { findOwnedInterface } from '../chat-interfaces/repository.ts';
import type { Context } from '../context.ts';
import { ownerProcedure, publicProcedure, router } from '../trpc.ts';
import { cancelBooking, createBooking, DAY_MS, freeSlotsOf, hashCancelToken, linkOriginOf, toAvailability, toBooking } from './booking-service.ts';
import * as repo from './repository.ts';
import { localIso } from './slots.ts';

const tags = ['Bookings'];
const MAX_WINDOW_DAYS = 62;
/**
 * Slots in one answer, earliest first. 62 days of 5-minute slots are ~17,500, and formatting their local times
 * held the event loop for seconds; a client that gets `truncated` asks again from after the last slot.
 */
export const MAX_SLOTS = 1000;
const bookingOut = z.object({ booking: bookingSchema });

const interfaceNotFound = () => new AppError('NOT_FOUND', 'Chat interface not found');
const bookingNotFound = () => new AppError('NOT_FOUND', 'Booking not found');

const instant = (value: string, field: string) => {
  const ms = parseCalendarInstant(value);
  if (Number.isNaN(ms)) throw new AppError('VALIDATION_FAILED', 'Invalid request parameters', `${field}: not a date-time`);
  return new Date(ms);
};

export function toAvailabilityOut(row: repo.AvailabilityRow) {
  const a = toAvailability(row);
  return { chatInterfaceId: row.chat_interface_id, ...a, updatedAt: row.updated_at.toISOString() };
}

/** Free slots of an interface in a window (default the next 7 days, at most 62), with local times in `timeZone`. */
export async function slotsOf(ctx: Pick<Context, 'deps'>, chatInterfaceId: string, window: { from?: string; to?: string; timeZone?: string }) {
  // The window is checked first: the same request is the same 400 whether or not the interface has hours.
  const from = window.from ? instant(window.from, 'from') : new Date();
  const to = window.to ? instant(window.to, 'to') : new Date(from.getTime() + 7 * DAY_MS);
  if (to <= from) throw new AppError('VALIDATION_FAILED', 'Invalid request parameters', 'to: must be after from');
  if (to.getTime() - from.getTime() > MAX_WINDOW_DAYS * DAY_MS) {
    throw new AppError('VALIDATION_FAILED', 'Invalid request parameters', `to: at most ${MAX_WINDOW_DAYS} days after from`);
  }
  const row = await repo.findAvailability(ctx.deps.database.db, chatInterfaceId);
  if (!row) return { timeZone: window.timeZone ?? 'UTC', availabilityTimeZone: null, slots: [], truncated: false };
  const availability = toAvailability(row);
  const zone = window.timeZone ?? availability.timeZone;
  const free = await freeSlotsOf(ctx.deps, chatInterfaceId, availability, { from, to });
  // Only the slots answered are formatted: the local times (luxon) are most of the cost of a long window.
  const slots = free.slice(0, MAX_SLOTS).map((s) => ({
    start: s.start.toISOString(),
    end: s.end.toISOString(),
    localStart: localIso(s.start, zone),
    localEnd: localIso(s.end, zone),
  }));
  return { timeZone: zone, availabilityTimeZone: availability.timeZone, slots, truncated: free.length > MAX_SLOTS };
}

export const slotsOutput = z.object({
  timeZone: z.string().meta({ description: 'The zone of localStart and localEnd' }),
  availabilityTimeZone: z.string().nullable().meta({ description: "The owner's zone; null when the interface has no booking hours" }),
  slots: z.array(slotSchema).meta({ description: `The earliest free slots of the window, at most ${MAX_SLOTS}` }),
  truncated: z.boolean().meta({
    description: `true when the window has more than ${MAX_SLOTS} free slots: ask again with from just after the last one`,
  }),
});

async function ownedInterfaceId(ctx: Context & { owner: { id: string } }, id: string) {
  if (namesNothing(id) || !(await findOwnedInterface(ctx.deps.database.db, ctx.owner.id, id))) throw interfaceNotFound();
  return id;
}

export const bookingsRouter = router({
  getAvailability: ownerProcedure
    .meta({
      openapi: {
        method: 'GET',
        path: '/api/v1/chat-interfaces/{id}/availability',
        tags,
        summary: 'When the interface can be booked (addition: the spec has no availability endpoint); null until set',
        protect: true,
      },
    })
    .input(z.object({ id: idParam }))
    .output(z.object({ availability: availabilitySchema.nullable() }))
    .query(async ({ ctx, input }) => {
      await ownedInterfaceId(ctx, input.id);
      const row = await repo.findAvailability(ctx.deps.database.db, input.id);
      return { availability: row ? toAvailabilityOut(row) : null };
    }),

  setAvailability: ownerProcedure
    .meta({
      openapi: {
        method: 'PUT',
        path: '/api/v1/chat-interfaces/{id}/availability',
        tags,
        summary: 'Sets the booking hours of the interface (addition): zone, weekly ranges, date overrides, slot rules',
        description: 'Existing bookings stay; the new rules apply to slots offered and booked from now on.',
        protect: true,
      },
    })
    .input(availabilityInput.extend({ id: idParam }))
    .output(z.object({ availability: availabilitySchema }))
    .mutation(async ({ ctx, input }) => {
      await ownedInterfaceId(ctx, input.id);
      const row = await repo.saveAvailability(ctx.deps.database.db, {
        chat_interface_id: input.id,
        owner_id: ctx.owner.id,
        time_zone: input.timeZone,
        weekly: input.weekly,
        overrides: input.overrides,
        slot_minutes: input.slotMinutes,
        interval_minutes: input.intervalMinutes ?? input.slotMinutes,
        buffer_before_minutes: input.bufferBeforeMinutes,
        buffer_after_minutes: input.bufferAfterMinutes,
        min_notice_minutes: input.minNoticeMinutes,
        max_days_ahead: input.maxDaysAhead,
        max_per_day: input.maxPerDay,
      });
      return { availability: toAvailabilityOut(row) };
    }),

  availableSlots: ownerProcedure
    .meta({
      openapi: {
        method: 'GET',
        path: '/api/v1/bookings/available-slots',
        tags,
        summary: 'Free slots of a chat interface in a window, in UTC with the local time in the requested zone beside each',
        description: 'Existing bookings and their buffers, minimum notice, the horizon and the day cap are applied. Empty when no availability is set.',
        protect: true,
        errorResponses: { NOT_FOUND: 'No chat interface of yours has this id' },
      },
    })
    .input(availableSlotsInput)
    .output(slotsOutput)
    .query(async ({ ctx, input }) => slotsOf(ctx, await ownedInterfaceId(ctx, input.chatInterfaceId), input)),

  list: ownerProcedure
    .meta({
      openapi: {
        method: 'GET',
        path: '/api/v1/bookings',
        tags,
        summary: 'Your bookings by start time, filtered by interface, status and time range',
        protect: true,
        errorResponses: { NOT_FOUND: 'chatInterfaceId names no chat interface of yours' },
      },
    })
    .input(listBookingsInput)
    .output(z.object({ bookings: z.array(bookingSchema), total: z.number().int(), limit: z.number().int(), offset: z.number().int() }))
    .query(async ({ ctx, input }) => {
      if (input.chatInterfaceId !== undefined) await ownedInterfaceId(ctx, input.chatInterfaceId);
      const { rows, total } = await repo.listBookings(ctx.deps.database.db, ctx.owner.id, {
        chatInterfaceId: input.chatInterfaceId,
        status: input.status,
        from: input.from ? instant(input.from, 'from') : undefined,
        to: input.to ? instant(input.to, 'to') : undefined,
        limit: input.limit,
        offset: input.offset,
      });
      return { bookings: rows.map(toBooking), total, limit: input.limit, offset: input.offset };
    }),

  create: ownerProcedure
    .meta({
      openapi: {
        method: 'POST',
        path: '/api/v1/bookings',
        tags,
        summary: 'Books a free slot for an attendee; both get a calendar invitation by mail',
        description:
          'The start must be one of the available slots; a slot that is not free (taken meanwhile, or never offered) is a 409. Emits `booking.created`.',
        protect: true,
        errorResponses: { NOT_FOUND: 'No chat interface of yours has this id', CONFLICT: 'The slot is not free, or the interface has no availability' },
      },
      successStatus: 201,
    })
    .input(createBookingInput)
    .output(bookingOut)
    .mutation(async ({ ctx, input }) => {
      const chatInterfaceId = await ownedInterfaceId(ctx, input.chatInterfaceId);
      const row = await createBooking(ctx.deps, {
        ownerId: ctx.owner.id,
        chatInterfaceId,
        start: instant(input.start, 'start'),
        attendee: input.attendee,
        notes: input.notes,
        source: 'api',
        linkOrigin: linkOriginOf(ctx),
      });
      return { booking: toBooking(row) };
    }),

  manual: ownerProcedure
    .meta({
      openapi: {
        method: 'POST',
        path: '/api/v1/bookings/manual',
        tags,
        summary: 'The owner books any time (a phone booking), outside the availability rules; never over another booking unless allowOverlap',
        protect: true,
        errorResponses: { NOT_FOUND: 'No chat interface of yours has this id', CONFLICT: 'Another booking overlaps and allowOverlap is false' },
      },
      successStatus: 201,
    })
    .input(manualBookingInput)
    .output(bookingOut)
    .mutation(async ({ ctx, input }) => {
      const chatInterfaceId = await ownedInterfaceId(ctx, input.chatInterfaceId);
      const start = instant(input.start, 'start');
      const end = instant(input.end, 'end');
      // A meeting that has begun cannot be attended: booking one would only mail invitations for the past.
      if (start.getTime() < Date.now()) throw new AppError('VALIDATION_FAILED', 'Invalid request parameters', 'start: must not be in the past');
      if (end <= start) throw new AppError('VALIDATION_FAILED', 'Invalid request parameters', 'end: must be after start');
      if (end.getTime() - start.getTime() > DAY_MS)
        throw new AppError('VALIDATION_FAILED', 'Invalid request parameters', 'end: a booking lasts at most 24 hours');
      const row = await createBooking(ctx.deps, {
        ownerId: ctx.owner.id,
        chatInterfaceId,
        start,
        end,
        attendee: input.attendee,
        notes: input.notes,
        source: 'manual',
        outsideRules: true,
        allowOverlap: input.allowOverlap,
        linkOrigin: linkOriginOf(ctx),
      });
      return { booking: toBooking(row) };
    }),

  cancel: ownerProcedure
    .meta({
      openapi: {
        method: 'POST',
        path: '/api/v1/bookings/{id}/cancel',
        tags,
        summary: 'Cancels a booking and frees its slot; the attendee gets the calendar cancellation. Idempotent',
        description: 'A second cancel answers the cancelled booking unchanged. Emits `booking.cancelled` once.',
        protect: true,
      },
    })
    .input(cancelBookingInput)
    .output(bookingOut)
    .mutation(async ({ ctx, input }) => {
      const booking = namesNothing(input.id) ? undefined : await repo.findOwnedBooking(ctx.deps.database.db, ctx.owner.id, input.id);
      if (!booking) throw bookingNotFound();
      const row = await cancelBooking(ctx.deps, booking, { reason: input.reason ?? null, by: 'owner', linkOrigin: linkOriginOf(ctx) });
      return { booking: toBooking(row) };
    }),

  attendeeCancel: publicProcedure
    .meta({
      openapi: {
        method: 'POST',
        path: '/api/v1/bookings/attendee-cancel',
        tags,
        summary: 'The attendee cancels with the token of the link in their mail (addition; public). Idempotent',
        description: 'The page at /bookings/cancel calls this with the token from its URL fragment. Emits `booking.cancelled` once.',
        errorResponses: { NOT_FOUND: 'No booking has this token' },
      },
    })
    .input(attendeeCancelInput)
    .output(z.object({ booking: z.object({ id: z.string(), status: z.enum(['confirmed', 'cancelled']), start: timestamp, end: timestamp }) }))
    .mutation(async ({ ctx, input }) => {
      const booking = await repo.findBookingByCancelToken(ctx.deps.database.db, hashCancelToken(input.token));
      if (!booking) throw bookingNotFound();
      const row = await cancelBooking(ctx.deps, booking, { reason: input.reason ?? null, by: 'attendee', linkOrigin: linkOriginOf(ctx) });
      return { booking: { id: row.id, status: row.status, start: row.start_at.toISOString(), end: row.end_at.toISOString() } };
    }),
});
