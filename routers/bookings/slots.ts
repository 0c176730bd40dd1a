import { DateTime, IANAZone } from 'luxon';
import { canonicalTimeZone } from '../../schema/bookings.ts';

/**
 * Availability / slot engine of bookings: pure logic, no I/O. All instants are absolute (Date); wall times are interpreted
 * in the owner's IANA zone with luxon, per local date, so DST changes are handled date by date (never with today's offset).
 */

export type Weekday = 'mon' | 'tue' | 'wed' | 'thu' | 'fri' | 'sat' | 'sun';
/** Local wall times 'HH:MM' (00:00..24:00), start < end. */
export interface TimeRange {
  start: string;
  end: string;
}
export interface Availability {
  /** IANA zone of the owner, e.g. 'Europe/Berlin'. */
  timeZone: string;
  /** Several ranges a day allowed; [] = closed that weekday. */
  weekly: Record<Weekday, TimeRange[]>;
  /** 'YYYY-MM-DD' local date; replaces that date's weekly ranges; [] = day off. */
  overrides: Array<{ date: string; ranges: TimeRange[] }>;
  /** Meeting length. */
  slotMinutes: number;
  /** Step between candidate starts. */
  intervalMinutes: number;
  bufferBeforeMinutes: number;
  bufferAfterMinutes: number;
  /** No slot starts earlier than now + this. */
  minNoticeMinutes: number;
  /** No slot starts later than now + this many days. */
  maxDaysAhead: number;
  /** At most this many bookings per local date (availability zone); null = no cap. */
  maxPerDay: number | null;
}
/** An existing confirmed booking's meeting time. */
export interface Busy {
  start: Date;
  end: Date;
}
export interface Slot {
  start: Date;
  end: Date;
}

const MINUTE = 60_000;
const DAY = 24 * 60 * MINUTE;
/** Runaway-work guard: a longer window is clamped to from + 62 days. */
const MAX_WINDOW_DAYS = 62;
/** Runaway-work guard: intervals below 5 minutes are treated as 5. */
const MIN_INTERVAL_MINUTES = 5;
const WEEKDAYS: readonly Weekday[] = ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun']; // luxon weekday 1..7

/** True when the zone is a valid IANA zone luxon knows. */
export function isValidTimeZone(zone: string): boolean {
  return typeof zone === 'string' && zone.length > 0 && IANAZone.isValidZone(zone);
}

/**
 * A zone read from a row in its canonical spelling (see canonicalTimeZone): rows written before zone names were
 * canonicalised may hold a caller's capitalisation, and each distinct spelling would stay in luxon's caches for ever.
 * A name Intl no longer knows is kept as it is (the slot engine then offers nothing).
 */
export const storedZone = (zone: string): string => canonicalTimeZone(zone) ?? zone;

/** Local wall-clock ISO string with offset of an instant in a zone, e.g. '2026-03-08T09:00:00.000-04:00'. */
export function localIso(instant: Date, timeZone: string): string {
  const iso = DateTime.fromJSDate(instant, { zone: timeZone }).toISO();
  if (iso === null) throw new RangeError(`Cannot express ${String(instant)} in time zone ${JSON.stringify(timeZone)}`);
  return iso;
}

/** Half-open overlap: [x1,x2) and [y1,y2) overlap when x1 < y2 && y1 < x2 (touching ends do not overlap). */
const overlaps = (x1: number, x2: number, y1: number, y2: number): boolean => x1 < y2 && y1 < x2;

/** Conflict rule on epoch milliseconds; see `conflicts`. */
function conflictsMs(s: number, e: number, before: number, after: number, busy: readonly Busy[]): boolean {
  for (const b of busy) {
    const bs = b.start.getTime();
    const be = b.end.getTime();
    // The candidate with its buffers hits the booking, or the candidate hits the booking with its buffers.
    if (overlaps(s - before, e + after, bs, be) || overlaps(s, e, bs - before, be + after)) return true;
  }
  return false;
}

/**
 * Whether a meeting [start,end) conflicts with a busy booking under the buffers: it does when
 * [start - bufferBefore, end + bufferAfter) overlaps [bs,be) OR [start,end) overlaps [bs - bufferBefore, be + bufferAfter).
 */
export function conflicts(a: Pick<Availability, 'bufferBeforeMinutes' | 'bufferAfterMinutes'>, start: Date, end: Date, busy: readonly Busy[]): boolean {
  return conflictsMs(start.getTime(), end.getTime(), minutes(a.bufferBeforeMinutes) * MINUTE, minutes(a.bufferAfterMinutes) * MINUTE, busy);
}

/** A non-negative finite number of minutes (garbage counts as 0). */
const minutes = (value: number): number => (Number.isFinite(value) && value > 0 ? value : 0);

/** 'HH:MM' -> minutes after local midnight (0..1440), or null when malformed. '24:00' is the only valid hour-24 value. */
function parseWallTime(value: string): number | null {
  const match = /^(\d{2}):(\d{2})$/.exec(value);
  if (!match) return null;
  const h = Number(match[1]);
  const m = Number(match[2]);
  if (h === 24 && m === 0) return 1440;
  return h < 24 && m < 60 ? h * 60 + m : null;
}

/** Calendar arithmetic on 'YYYY-MM-DD' dates (in UTC, so no zone rules interfere). */
const addDays = (date: string, days: number): string => DateTime.fromISO(date, { zone: 'utc' }).plus({ days }).toISODate()!;

/** Instant of a wall time on local date D in the zone; '24:00' is the start of the next day. Luxon moves a time inside a DST gap forward. */
function wallToMs(date: string, minuteOfDay: number, zone: string): number {
  if (minuteOfDay >= 1440) return DateTime.fromISO(addDays(date, 1), { zone }).toMillis();
  const hh = String(Math.floor(minuteOfDay / 60)).padStart(2, '0');
  const mm = String(minuteOfDay % 60).padStart(2, '0');
  return DateTime.fromISO(`${date}T${hh}:${mm}`, { zone }).toMillis();
}

interface Rules {
  zone: string;
  overrides: Map<string, TimeRange[]>;
  weekly: Record<Weekday, TimeRange[]>;
  slotMs: number;
  stepMs: number;
  beforeMs: number;
  afterMs: number;
  earliest: number; // now + minNotice
  latest: number; // now + maxDaysAhead days
  maxPerDay: number | null;
}

function rulesOf(a: Availability, now: Date): Rules | null {
  if (!isValidTimeZone(a.timeZone)) return null;
  if (!(Number.isFinite(a.slotMinutes) && a.slotMinutes > 0)) return null; // a slot must last some time
  const nowMs = now.getTime();
  if (Number.isNaN(nowMs)) return null;
  // Later overrides for the same date win.
  const overrides = new Map<string, TimeRange[]>();
  for (const o of a.overrides) overrides.set(o.date, o.ranges);
  return {
    zone: a.timeZone,
    overrides,
    weekly: a.weekly,
    slotMs: a.slotMinutes * MINUTE,
    // Intervals below 5 minutes are treated as 5.
    stepMs: Math.max(MIN_INTERVAL_MINUTES, Number.isFinite(a.intervalMinutes) ? a.intervalMinutes : 0) * MINUTE,
    beforeMs: minutes(a.bufferBeforeMinutes) * MINUTE,
    afterMs: minutes(a.bufferAfterMinutes) * MINUTE,
    earliest: nowMs + minutes(a.minNoticeMinutes) * MINUTE,
    // maxDaysAhead counts absolute 24-hour days from now.
    latest: nowMs + minutes(a.maxDaysAhead) * DAY,
    maxPerDay: a.maxPerDay,
  };
}

/**
 * Free slot starts (epoch ms) on one local date D of the availability zone, within [lo, hi).
 * Every slot start lies on D: ranges end at the latest at 24:00, the start of D + 1.
 */
function dayStarts(r: Rules, date: string, busy: readonly Busy[], nearBusy: readonly Busy[], lo: number, hi: number, out: Set<number>): void {
  // The override for D if one exists, else weekly[weekday(D)].
  const ranges = r.overrides.get(date) ?? r.weekly[WEEKDAYS[DateTime.fromISO(date, { zone: 'utc' }).weekday - 1]!] ?? [];
  if (ranges.length === 0) return;
  // Per-day cap: count busy bookings whose START falls on local date D, i.e. in [start of D, start of D + 1).
  if (r.maxPerDay !== null) {
    const dayStart = wallToMs(date, 0, r.zone);
    const dayEnd = wallToMs(date, 1440, r.zone);
    let count = 0;
    for (const b of busy) {
      const bs = b.start.getTime();
      if (bs >= dayStart && bs < dayEnd) count++;
    }
    if (count >= r.maxPerDay) return;
  }
  for (const range of ranges) {
    const startMin = parseWallTime(range.start);
    const endMin = parseWallTime(range.end);
    if (startMin === null || endMin === null || startMin >= endMin) continue; // malformed ranges are ignored
    const rangeStart = wallToMs(date, startMin, r.zone);
    const rangeEnd = wallToMs(date, endMin, r.zone);
    // Candidates step in ABSOLUTE time from the range's start instant while start + slot <= range end, so every slot
    // lasts exactly slotMinutes of real time, also across DST changes.
    // Skip straight to the first candidate on the step grid that is not before the window.
    const first = rangeStart < lo ? rangeStart + Math.ceil((lo - rangeStart) / r.stepMs) * r.stepMs : rangeStart;
    for (let s = first; s + r.slotMs <= rangeEnd && s < hi; s += r.stepMs) {
      if (s < r.earliest || s > r.latest) continue; // minimum notice, maximum days ahead
      if (conflictsMs(s, s + r.slotMs, r.beforeMs, r.afterMs, nearBusy)) continue;
      out.add(s); // a Set: overlapping ranges on one day yield each start once
    }
  }
}

/** Free slots whose start lies in [from, to), sorted ascending, no duplicates. */
export function freeSlots(a: Availability, busy: readonly Busy[], window: { from: Date; to: Date }, now: Date): Slot[] {
  const r = rulesOf(a, now);
  const from = window.from.getTime();
  // Windows longer than 62 days are clamped to from + 62 days.
  const to = Math.min(window.to.getTime(), from + MAX_WINDOW_DAYS * DAY);
  if (r === null || !(from < to)) return [];
  // Only bookings near the window can conflict with a slot starting in it (the per-day cap counts all bookings).
  const reach = r.slotMs + r.beforeMs + r.afterMs;
  const nearBusy = busy.filter((b) => b.end.getTime() > from - reach && b.start.getTime() < to + reach);
  // Local dates from the local date of `from` minus one day to the local date of `to` plus one day, to be safe.
  const fromDate = DateTime.fromMillis(from, { zone: r.zone }).toISODate();
  const toDate = DateTime.fromMillis(to, { zone: r.zone }).toISODate();
  if (fromDate === null || toDate === null) return []; // instants luxon cannot represent
  const starts = new Set<number>();
  // Counted, not compared as text: ISO dates past year 9999 ('+010000-01-01') sort below '9999-12-31'.
  const days = Math.round((Date.parse(`${toDate}T00:00:00Z`) - Date.parse(`${fromDate}T00:00:00Z`)) / DAY) + 2;
  let date = addDays(fromDate, -1);
  for (let i = 0; i <= days && i <= MAX_WINDOW_DAYS + 3; i++, date = addDays(date, 1)) dayStarts(r, date, busy, nearBusy, from, to, starts);
  return [...starts].sort((x, y) => x - y).map((s) => ({ start: new Date(s), end: new Date(s + r.slotMs) }));
}

/** Whether a candidate [start, start+slotMinutes) is one of freeSlots(...) (cheap: only computes that start's local date). */
export function isFreeSlot(a: Availability, busy: readonly Busy[], start: Date, now: Date): boolean {
  const r = rulesOf(a, now);
  const s = start.getTime();
  if (r === null || Number.isNaN(s)) return false;
  const date = DateTime.fromMillis(s, { zone: r.zone }).toISODate();
  if (date === null) return false;
  // A slot always lies on the local date of its start, so that one date decides; the window is just [start, start + 1ms).
  const starts = new Set<number>();
  dayStarts(r, date, busy, busy, s, s + 1, starts);
  return starts.has(s);
}
