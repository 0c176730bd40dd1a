import { z } from 'zod';
import { idParam, queryInt, singleLineText, timestamp } from './common.ts';

/** An instant in ISO 8601 with a zone designator (Z or an offset); Date.parse alone accepts far looser text. */
const EARLIEST = Date.UTC(1970, 0, 1);
const LATEST = Date.UTC(9000, 0, 1);
/**
 * An instant in ISO 8601 with a zone designator (Z or an offset), between 1970 and 9000: Date.parse alone accepts
 * far looser text, and years near 0 or 10000 break date arithmetic and the database's range.
 */
export const instantInput = z.iso
  .datetime({ offset: true })
  .refine((text) => {
    const ms = Date.parse(text);
    return ms >= EARLIEST && ms < LATEST;
  }, 'must be between 1970 and 9000')
  .meta({ example: '2027-03-15T13:00:00Z' });

/** An IANA zone Intl knows (the same database luxon reads). */
export const timeZoneSchema = z
  .string()
  .min(1)
  .max(64)
  .refine((zone) => {
    try {
      new Intl.DateTimeFormat('en', { timeZone: zone });
      return true;
    } catch {
      return false;
    }
  }, 'must be an IANA time zone such as Europe/Berlin')
  .meta({ example: 'Europe/Berlin' });

const wallTime = z
  .string()
  .regex(/^(([01]\d|2[0-3]):[0-5]\d|24:00)$/, 'must be HH:MM (00:00 to 24:00)')
  .meta({ example: '09:00' });
const timeRange = z.object({ start: wallTime, end: wallTime }).refine((r) => r.start < r.end, { message: 'start must be before end', path: ['end'] });
const dayRanges = z.array(timeRange).max(12).default([]);
const localDate = z
  .string()
  .regex(/^\d{4}-\d{2}-\d{2}$/, 'must be YYYY-MM-DD')
  .refine((d) => !Number.isNaN(Date.parse(`${d}T00:00:00Z`)) && new Date(`${d}T00:00:00Z`).toISOString().startsWith(d), 'is not a calendar date');

export const weeklyHoursSchema = z.object({
  mon: dayRanges,
  tue: dayRanges,
  wed: dayRanges,
  thu: dayRanges,
  fri: dayRanges,
  sat: dayRanges,
  sun: dayRanges,
});

export const availabilityInput = z.object({
  timeZone: timeZoneSchema,
  weekly: weeklyHoursSchema.meta({ description: 'Local wall-clock ranges per weekday in timeZone; several a day; [] = closed' }),
  overrides: z
    .array(z.object({ date: localDate, ranges: z.array(timeRange).max(12) }))
    .max(366)
    .default([])
    .refine((list) => new Set(list.map((o) => o.date)).size === list.length, 'each date may be overridden once')
    .meta({ description: 'Dates whose hours replace the weekly ones; ranges [] = a day off' }),
  slotMinutes: z.number().int().min(5).max(480).default(30),
  intervalMinutes: z.number().int().min(5).max(480).optional().meta({ description: 'Between candidate starts; default: slotMinutes' }),
  bufferBeforeMinutes: z.number().int().min(0).max(240).default(0),
  bufferAfterMinutes: z.number().int().min(0).max(240).default(0),
  minNoticeMinutes: z
    .number()
    .int()
    .min(0)
    .max(60 * 24 * 30)
    .default(60),
  maxDaysAhead: z.number().int().min(1).max(365).default(60),
  maxPerDay: z.number().int().min(1).max(500).nullable().default(null),
});

export const availabilitySchema = z
  .object({
    chatInterfaceId: z.string(),
    timeZone: z.string(),
    weekly: z.record(z.string(), z.array(z.object({ start: z.string(), end: z.string() }))),
    overrides: z.array(z.object({ date: z.string(), ranges: z.array(z.object({ start: z.string(), end: z.string() })) })),
    slotMinutes: z.number().int(),
    intervalMinutes: z.number().int(),
    bufferBeforeMinutes: z.number().int(),
    bufferAfterMinutes: z.number().int(),
    minNoticeMinutes: z.number().int(),
    maxDaysAhead: z.number().int(),
    maxPerDay: z.number().int().nullable(),
    updatedAt: timestamp,
  })
  .meta({ id: 'BookingAvailability' });

export const slotSchema = z.object({
  start: timestamp,
  end: timestamp,
  localStart: z.string().meta({ description: 'The start in the requested time zone, ISO 8601 with its offset', example: '2026-03-09T09:00:00.000-04:00' }),
  localEnd: z.string(),
});

export const availableSlotsInput = z.object({
  chatInterfaceId: idParam,
  from: instantInput.optional().meta({ description: 'Default: now' }),
  to: instantInput.optional().meta({ description: 'Default: from + 7 days; at most 62 days after from' }),
  timeZone: timeZoneSchema.optional().meta({ description: "Zone of localStart/localEnd; default: the availability's" }),
});

/** Who books: the same fields from the owner's API and from the chat. */
export const attendeeInput = z.object({
  name: singleLineText(200).meta({ description: 'One line: it is in the subject and the invitation of the booking mails' }),
  email: z.email().max(254),
  phone: singleLineText(40).min(3).optional().meta({ description: 'One line: it is written into the owner’s booking mails' }),
  timeZone: timeZoneSchema.optional().meta({ description: "The attendee's zone, for their mails; default: the availability's" }),
});

export const createBookingInput = z.object({
  chatInterfaceId: idParam,
  start: instantInput.meta({ description: 'The start of one of the available slots (UTC or with an offset)' }),
  attendee: attendeeInput,
  notes: z.string().max(2000).optional(),
});

export const manualBookingInput = z.object({
  chatInterfaceId: idParam,
  start: instantInput,
  end: instantInput,
  attendee: attendeeInput,
  notes: z.string().max(2000).optional(),
  allowOverlap: z.boolean().default(false).meta({ description: 'Book even over another booking (it then does not block others either)' }),
});

export const cancelBookingInput = z.object({ id: idParam, reason: z.string().trim().max(500).optional() });
export const attendeeCancelInput = z.object({
  token: z.string().min(10).max(200).meta({ description: 'The token from the cancellation link in the confirmation mail' }),
  reason: z.string().trim().max(500).optional(),
});

export const listBookingsInput = z.object({
  chatInterfaceId: idParam.optional(),
  status: z.enum(['confirmed', 'cancelled']).optional(),
  from: instantInput.optional().meta({ description: 'Bookings that end after this instant' }),
  to: instantInput.optional().meta({ description: 'Bookings that start before this instant' }),
  limit: queryInt({ min: 1, max: 200 }).default(50),
  offset: queryInt({ min: 0, max: 1_000_000 }).default(0),
});

export const bookingSchema = z
  .object({
    id: z.string(),
    chatInterfaceId: z.string(),
    status: z.enum(['confirmed', 'cancelled']),
    source: z.enum(['api', 'manual', 'chat']),
    start: timestamp,
    end: timestamp,
    localStart: z.string().meta({ description: "The start in the attendee's time zone" }),
    exclusive: z.boolean().meta({ description: 'false for a manual booking made with allowOverlap' }),
    attendee: z.object({ name: z.string(), email: z.string(), phone: z.string().nullable(), timeZone: z.string() }),
    notes: z.string().nullable(),
    sessionId: z.string().nullable(),
    cancelReason: z.string().nullable(),
    cancelledBy: z.enum(['owner', 'attendee']).nullable(),
    cancelledAt: timestamp.nullable(),
    createdAt: timestamp,
  })
  .meta({ id: 'Booking' });

export const bookingEventSchema = bookingSchema;
