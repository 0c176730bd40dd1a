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

/**
 * Current IANA names that the ICU under Node 20's Intl reports by an older alias (Asia/Kolkata as Asia/Calcutta,
 * Europe/Kyiv as Europe/Kiev): a caller who names one of these, in any case, gets it back spelled so.
 */
const CURRENT_IANA_NAMES = [
  'Africa/Asmara',
  'America/Argentina/Buenos_Aires',
  'America/Argentina/Catamarca',
  'America/Argentina/Cordoba',
  'America/Argentina/Jujuy',
  'America/Argentina/Mendoza',
  'America/Atikokan',
  'America/Indiana/Indianapolis',
  'America/Kentucky/Louisville',
  'America/Nuuk',
  'Asia/Ho_Chi_Minh',
  'Asia/Kathmandu',
  'Asia/Kolkata',
  'Asia/Yangon',
  'Atlantic/Faroe',
  'Europe/Kyiv',
  'Pacific/Chuuk',
  'Pacific/Kanton',
  'Pacific/Pohnpei',
];
/** Intl matches zone names ignoring ASCII case, so this is the key of a name (and of all its spellings). */
const asciiLower = (text: string) => text.replace(/[A-Z]/g, (c) => c.toLowerCase());
const currentByKey = new Map(CURRENT_IANA_NAMES.map((name) => [asciiLower(name), name]));
/** By asciiLower key, valid zones only: at most the few hundred names Intl knows (the cap is a backstop). */
const canonicalByKey = new Map<string, string>();
const CANONICAL_CACHE_MAX = 2000;

/**
 * The one spelling of a zone name Intl accepts, or null when it accepts none: the name as the runtime's Intl spells
 * it (`europe/BERLIN` -> `Europe/Berlin`, `utc` -> `UTC`), or the current IANA name above, or else the zone Intl
 * resolves an old alias to (`us/eastern` -> `America/New_York`). Every case variant of a name gives the same answer,
 * so the names that reach luxon (which keeps one zone object and one Intl.DateTimeFormat per distinct string, for
 * ever) are a bounded set; caller-chosen capitalisations would grow that cache without end. Memoised: building the
 * DateTimeFormat costs 0.1-0.4 ms.
 */
export function canonicalTimeZone(zone: string): string | null {
  // An offset (`+01:00`) is no IANA name: Intl takes one from Node 24 on (ECMA-402 2024) and Node 20 does not, and
  // each of its thousands of spellings would be a zone of its own to luxon.
  if (zone.startsWith('+') || zone.startsWith('-') || zone.startsWith('\u2212')) return null;
  const key = asciiLower(zone);
  const known = canonicalByKey.get(key);
  if (known !== undefined) return known;
  let resolved: string;
  try {
    resolved = new Intl.DateTimeFormat('en', { timeZone: zone }).resolvedOptions().timeZone;
  } catch {
    return null;
  }
  const canonical = asciiLower(resolved) === key ? resolved : (currentByKey.get(key) ?? resolved);
  if (canonicalByKey.size < CANONICAL_CACHE_MAX) canonicalByKey.set(key, canonical);
  return canonical;
}

/**
 * An IANA zone Intl knows (the same database luxon reads), answered and stored in its canonical spelling
 * (canonicalTimeZone): never the caller's own capitalisation.
 */
export const timeZoneSchema = z
  .string()
  .min(1)
  .max(64)
  .transform((zone, ctx) => {
    const canonical = canonicalTimeZone(zone);
    if (canonical !== null) return canonical;
    ctx.addIssue({ code: 'custom', message: 'must be an IANA time zone such as Europe/Berlin', input: zone });
    return z.NEVER;
  })
  .meta({ example: 'Europe/Berlin', description: 'An IANA time zone; answered in its canonical spelling (europe/berlin -> Europe/Berlin)' });

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
