import fc from 'fast-check';
import { DateTime } from 'luxon';
import { describe, expect, it } from 'vitest';
import { type Availability, type Busy, conflicts, freeSlots, isFreeSlot, isValidTimeZone, localIso, type Slot, type TimeRange, type Weekday } from './slots.ts';

const MINUTE = 60_000;
const DAY = 24 * 60 * MINUTE;
const WEEKDAYS: readonly Weekday[] = ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'];

const closed = (): Record<Weekday, TimeRange[]> => ({ mon: [], tue: [], wed: [], thu: [], fri: [], sat: [], sun: [] });
const every = (...ranges: TimeRange[]): Record<Weekday, TimeRange[]> => ({
  mon: ranges,
  tue: ranges,
  wed: ranges,
  thu: ranges,
  fri: ranges,
  sat: ranges,
  sun: ranges,
});
const weekdays = (...ranges: TimeRange[]): Record<Weekday, TimeRange[]> => ({ ...closed(), mon: ranges, tue: ranges, wed: ranges, thu: ranges, fri: ranges });
const r = (start: string, end: string): TimeRange => ({ start, end });

/** An availability in New York with 30-minute slots every 30 minutes and no limits, changed by `changes`. */
const avail = (changes: Partial<Availability>): Availability => ({
  timeZone: 'America/New_York',
  weekly: closed(),
  overrides: [],
  slotMinutes: 30,
  intervalMinutes: 30,
  bufferBeforeMinutes: 0,
  bufferAfterMinutes: 0,
  minNoticeMinutes: 0,
  maxDaysAhead: 1000,
  maxPerDay: null,
  ...changes,
});

const NOW = new Date('2025-12-01T00:00:00Z');
const at = (iso: string): Date => new Date(iso);
/** The local date's [start, next start) in the zone. */
const day = (date: string, zone: string) => ({
  from: DateTime.fromISO(date, { zone }).toJSDate(),
  to: DateTime.fromISO(date, { zone }).plus({ days: 1 }).toJSDate(),
});
/** The instant of a local wall time in the zone. */
const local = (isoWall: string, zone: string): Date => DateTime.fromISO(isoWall, { zone }).toJSDate();
const utcStarts = (slots: Slot[]) => slots.map((s) => s.start.toISOString());
const localStarts = (slots: Slot[], zone: string) => slots.map((s) => localIso(s.start, zone));
const walls = (slots: Slot[], zone: string) => slots.map((s) => DateTime.fromJSDate(s.start, { zone }).toFormat('HH:mm'));
const lengths = (slots: Slot[]) => new Set(slots.map((s) => (s.end.getTime() - s.start.getTime()) / MINUTE));

describe('DST days', () => {
  const ny = 'America/New_York';

  it('New York spring forward (2026-03-08): 01:00-04:00 holds 2 real hours, no 02:xx wall time', () => {
    const a = avail({ weekly: { ...closed(), sun: [r('01:00', '04:00')] } });
    const slots = freeSlots(a, [], day('2026-03-08', ny), NOW);
    expect(localStarts(slots, ny)).toEqual([
      '2026-03-08T01:00:00.000-05:00',
      '2026-03-08T01:30:00.000-05:00',
      '2026-03-08T03:00:00.000-04:00',
      '2026-03-08T03:30:00.000-04:00',
    ]);
    expect(utcStarts(slots)).toEqual(['2026-03-08T06:00:00.000Z', '2026-03-08T06:30:00.000Z', '2026-03-08T07:00:00.000Z', '2026-03-08T07:30:00.000Z']);
    expect(walls(slots, ny).some((w) => w.startsWith('02:'))).toBe(false);
    expect(lengths(slots)).toEqual(new Set([30]));
  });

  it('New York fall back (2026-11-01): 00:00-03:00 holds 4 real hours, 8 slots of 30 real minutes', () => {
    const a = avail({ weekly: { ...closed(), sun: [r('00:00', '03:00')] } });
    const slots = freeSlots(a, [], day('2026-11-01', ny), NOW);
    expect(slots).toHaveLength(8);
    expect(utcStarts(slots)).toEqual([
      '2026-11-01T04:00:00.000Z',
      '2026-11-01T04:30:00.000Z',
      '2026-11-01T05:00:00.000Z',
      '2026-11-01T05:30:00.000Z',
      '2026-11-01T06:00:00.000Z',
      '2026-11-01T06:30:00.000Z',
      '2026-11-01T07:00:00.000Z',
      '2026-11-01T07:30:00.000Z',
    ]);
    expect(walls(slots, ny)).toEqual(['00:00', '00:30', '01:00', '01:30', '01:00', '01:30', '02:00', '02:30']);
    expect(lengths(slots)).toEqual(new Set([30]));
    expect(slots.at(-1)!.end.toISOString()).toBe('2026-11-01T08:00:00.000Z'); // 03:00 EST
  });

  it('a 09:00-17:00 weekday in New York starts at 09:00 local before and after DST, whatever the offset of now', () => {
    const a = avail({ weekly: weekdays(r('09:00', '17:00')) });
    const summerNow = new Date('2025-07-01T12:00:00Z'); // EDT at "now"
    const winterNow = new Date('2026-01-05T12:00:00Z'); // EST at "now"
    const before = freeSlots(a, [], day('2026-03-06', ny), summerNow); // Friday, EST
    const after = freeSlots(a, [], day('2026-03-09', ny), winterNow); // Monday, EDT
    expect(before).toHaveLength(16);
    expect(after).toHaveLength(16);
    expect(before[0]!.start.toISOString()).toBe('2026-03-06T14:00:00.000Z');
    expect(after[0]!.start.toISOString()).toBe('2026-03-09T13:00:00.000Z');
    expect(walls(before, ny)[0]).toBe('09:00');
    expect(walls(after, ny)[0]).toBe('09:00');
    expect(walls(before, ny).at(-1)).toBe('16:30');
    expect(walls(after, ny).at(-1)).toBe('16:30');
  });

  it('Europe/Berlin spring forward (2026-03-29) and fall back (2026-10-25)', () => {
    const berlin = 'Europe/Berlin';
    const spring = freeSlots(avail({ timeZone: berlin, weekly: { ...closed(), sun: [r('01:00', '04:00')] } }), [], day('2026-03-29', berlin), NOW);
    expect(localStarts(spring, berlin)).toEqual([
      '2026-03-29T01:00:00.000+01:00',
      '2026-03-29T01:30:00.000+01:00',
      '2026-03-29T03:00:00.000+02:00',
      '2026-03-29T03:30:00.000+02:00',
    ]);
    const fall = freeSlots(avail({ timeZone: berlin, weekly: { ...closed(), sun: [r('00:00', '04:00')] } }), [], day('2026-10-25', berlin), NOW);
    expect(fall).toHaveLength(10); // 5 real hours
    expect(walls(fall, berlin)).toEqual(['00:00', '00:30', '01:00', '01:30', '02:00', '02:30', '02:00', '02:30', '03:00', '03:30']);
    expect(lengths([...spring, ...fall])).toEqual(new Set([30]));
    // A normal weekday: 09:00 local is 08:00Z in winter time and 07:00Z in summer time.
    const weekday = avail({ timeZone: berlin, weekly: weekdays(r('09:00', '10:00')) });
    expect(utcStarts(freeSlots(weekday, [], day('2026-03-27', berlin), NOW))).toEqual(['2026-03-27T08:00:00.000Z', '2026-03-27T08:30:00.000Z']);
    expect(utcStarts(freeSlots(weekday, [], day('2026-03-30', berlin), NOW))).toEqual(['2026-03-30T07:00:00.000Z', '2026-03-30T07:30:00.000Z']);
  });

  it('Asia/Kolkata (+05:30, no DST): 09:00 local is 03:30Z', () => {
    const kolkata = 'Asia/Kolkata';
    const slots = freeSlots(avail({ timeZone: kolkata, weekly: weekdays(r('09:00', '10:00')) }), [], day('2026-03-09', kolkata), NOW);
    expect(utcStarts(slots)).toEqual(['2026-03-09T03:30:00.000Z', '2026-03-09T04:00:00.000Z']);
    expect(localStarts(slots, kolkata)).toEqual(['2026-03-09T09:00:00.000+05:30', '2026-03-09T09:30:00.000+05:30']);
  });

  describe('Australia/Lord_Howe (30-minute DST)', () => {
    const lh = 'Australia/Lord_Howe';

    it('2026-04-05: 02:00 goes back to 01:30, so 01:00-03:00 holds 2.5 real hours', () => {
      const slots = freeSlots(avail({ timeZone: lh, weekly: { ...closed(), sun: [r('01:00', '03:00')] } }), [], day('2026-04-05', lh), NOW);
      expect(localStarts(slots, lh)).toEqual([
        '2026-04-05T01:00:00.000+11:00',
        '2026-04-05T01:30:00.000+11:00',
        '2026-04-05T01:30:00.000+10:30',
        '2026-04-05T02:00:00.000+10:30',
        '2026-04-05T02:30:00.000+10:30',
      ]);
      expect(lengths(slots)).toEqual(new Set([30]));
    });

    it('2026-10-04: 02:00 jumps to 02:30, so 01:00-04:00 holds 2.5 real hours and no slot starts at 02:00-02:29', () => {
      const slots = freeSlots(avail({ timeZone: lh, weekly: { ...closed(), sun: [r('01:00', '04:00')] } }), [], day('2026-10-04', lh), NOW);
      expect(localStarts(slots, lh)).toEqual([
        '2026-10-04T01:00:00.000+10:30',
        '2026-10-04T01:30:00.000+10:30',
        '2026-10-04T02:30:00.000+11:00',
        '2026-10-04T03:00:00.000+11:00',
        '2026-10-04T03:30:00.000+11:00',
      ]);
      expect(lengths(slots)).toEqual(new Set([30]));
      expect(walls(slots, lh).filter((w) => w >= '02:00' && w < '02:30')).toEqual([]);
    });

    it('a range starting inside the gap starts at the moved-forward instant', () => {
      const a = avail({ timeZone: lh, weekly: { ...closed(), sun: [r('02:00', '03:00')] }, slotMinutes: 15, intervalMinutes: 15 });
      const slots = freeSlots(a, [], day('2026-10-04', lh), NOW);
      expect(localStarts(slots, lh)).toEqual(['2026-10-04T02:30:00.000+11:00', '2026-10-04T02:45:00.000+11:00']);
    });
  });
});

describe('ranges and overrides', () => {
  const berlin = 'Europe/Berlin';
  const base = avail({ timeZone: berlin, weekly: weekdays(r('09:00', '17:00')) });

  it('an override with no ranges is a day off', () => {
    const a = { ...base, overrides: [{ date: '2026-06-15', ranges: [] }] };
    expect(freeSlots(a, [], day('2026-06-15', berlin), NOW)).toEqual([]);
    expect(freeSlots(a, [], day('2026-06-16', berlin), NOW)).toHaveLength(16);
  });

  it('an override replaces the weekly hours of its date, also on a closed weekday', () => {
    const a = {
      ...base,
      overrides: [
        { date: '2026-06-16', ranges: [r('10:00', '12:00')] },
        { date: '2026-06-20', ranges: [r('10:00', '11:00')] }, // Saturday, closed weekly
      ],
    };
    expect(walls(freeSlots(a, [], day('2026-06-16', berlin), NOW), berlin)).toEqual(['10:00', '10:30', '11:00', '11:30']);
    expect(walls(freeSlots(a, [], day('2026-06-20', berlin), NOW), berlin)).toEqual(['10:00', '10:30']);
    expect(freeSlots(a, [], day('2026-06-21', berlin), NOW)).toEqual([]); // Sunday, closed
  });

  it('several ranges a day leave the lunch gap free of slots', () => {
    const a = { ...base, weekly: weekdays(r('09:00', '12:00'), r('13:00', '17:00')) };
    const w = walls(freeSlots(a, [], day('2026-06-16', berlin), NOW), berlin);
    expect(w).toHaveLength(14);
    expect(w).toContain('11:30');
    expect(w).not.toContain('12:00');
    expect(w).not.toContain('12:30');
    expect(w[6]).toBe('13:00');
  });

  it('overlapping ranges yield each start once', () => {
    const a = { ...base, weekly: weekdays(r('10:00', '12:00'), r('09:00', '11:00')) };
    expect(walls(freeSlots(a, [], day('2026-06-16', berlin), NOW), berlin)).toEqual(['09:00', '09:30', '10:00', '10:30', '11:00', '11:30']);
  });

  it('steps by intervalMinutes and fits whole slots; 24:00 is the end of the day', () => {
    const stepped = { ...base, weekly: weekdays(r('09:00', '10:00')), intervalMinutes: 15 };
    expect(walls(freeSlots(stepped, [], day('2026-06-16', berlin), NOW), berlin)).toEqual(['09:00', '09:15', '09:30']);
    const late = { ...base, weekly: weekdays(r('23:00', '24:00')) };
    const slots = freeSlots(late, [], day('2026-06-16', berlin), NOW);
    expect(localStarts(slots, berlin)).toEqual(['2026-06-16T23:00:00.000+02:00', '2026-06-16T23:30:00.000+02:00']);
    expect(localIso(slots[1]!.end, berlin)).toBe('2026-06-17T00:00:00.000+02:00');
  });

  it('intervals below 5 minutes are treated as 5', () => {
    const a = { ...base, weekly: weekdays(r('09:00', '09:30')), slotMinutes: 5 };
    expect(freeSlots({ ...a, intervalMinutes: 1 }, [], day('2026-06-16', berlin), NOW)).toHaveLength(6);
    expect(freeSlots({ ...a, intervalMinutes: 0 }, [], day('2026-06-16', berlin), NOW)).toHaveLength(6);
  });

  it('malformed input yields no slots rather than throwing', () => {
    expect(freeSlots({ ...base, timeZone: 'Mars/Olympus_Mons' }, [], day('2026-06-16', berlin), NOW)).toEqual([]);
    expect(freeSlots({ ...base, slotMinutes: 0 }, [], day('2026-06-16', berlin), NOW)).toEqual([]);
    const malformed = weekdays(r('17:00', '09:00'), r('9:00', '10:00'), r('24:30', '25:00'), r('12:60', '13:00'));
    expect(freeSlots({ ...base, weekly: malformed }, [], day('2026-06-16', berlin), NOW)).toEqual([]);
  });
});

describe('limits', () => {
  const berlin = 'Europe/Berlin';
  const base = avail({ timeZone: berlin, weekly: weekdays(r('09:00', '13:00')) });
  const tuesday = day('2026-06-16', berlin);
  const meeting = (start: string, end: string): Busy => ({ start: local(start, berlin), end: local(end, berlin) });

  it('busy bookings block overlapping slots; touching ends do not', () => {
    const busy = [meeting('2026-06-16T10:00', '2026-06-16T11:00')];
    expect(walls(freeSlots(base, busy, tuesday, NOW), berlin)).toEqual(['09:00', '09:30', '11:00', '11:30', '12:00', '12:30']);
  });

  it('buffers on both sides', () => {
    const busy = [meeting('2026-06-16T10:00', '2026-06-16T11:00')];
    const a = { ...base, bufferBeforeMinutes: 15, bufferAfterMinutes: 15 };
    expect(walls(freeSlots(a, busy, tuesday, NOW), berlin)).toEqual(['09:00', '11:30', '12:00', '12:30']);
  });

  it('an after-buffer keeps distance on both sides of a booking (either interval padded)', () => {
    const busy = [meeting('2026-06-16T10:00', '2026-06-16T11:00')];
    const a = { ...base, bufferBeforeMinutes: 0, bufferAfterMinutes: 30 };
    // 09:30-10:00 padded to 10:30 hits the booking; 11:00-11:30 hits the booking padded to 11:30.
    expect(walls(freeSlots(a, busy, tuesday, NOW), berlin)).toEqual(['09:00', '11:30', '12:00', '12:30']);
  });

  it('conflicts() follows the rule', () => {
    const b = (start: string, end: string): Busy[] => [{ start: at(start), end: at(end) }];
    const busy = b('2026-06-16T10:00:00Z', '2026-06-16T11:00:00Z');
    const none = { bufferBeforeMinutes: 0, bufferAfterMinutes: 0 };
    expect(conflicts(none, at('2026-06-16T09:30:00Z'), at('2026-06-16T10:00:00Z'), busy)).toBe(false);
    expect(conflicts(none, at('2026-06-16T11:00:00Z'), at('2026-06-16T11:30:00Z'), busy)).toBe(false);
    expect(conflicts(none, at('2026-06-16T10:59:00Z'), at('2026-06-16T11:30:00Z'), busy)).toBe(true);
    expect(conflicts(none, at('2026-06-16T09:00:00Z'), at('2026-06-16T12:00:00Z'), busy)).toBe(true);
    expect(conflicts({ bufferBeforeMinutes: 10, bufferAfterMinutes: 0 }, at('2026-06-16T11:00:00Z'), at('2026-06-16T11:30:00Z'), busy)).toBe(true);
    expect(conflicts({ bufferBeforeMinutes: 10, bufferAfterMinutes: 0 }, at('2026-06-16T11:10:00Z'), at('2026-06-16T11:30:00Z'), busy)).toBe(false);
    expect(conflicts({ bufferBeforeMinutes: 0, bufferAfterMinutes: 10 }, at('2026-06-16T09:30:00Z'), at('2026-06-16T09:55:00Z'), busy)).toBe(true);
    expect(conflicts({ bufferBeforeMinutes: 0, bufferAfterMinutes: 10 }, at('2026-06-16T09:30:00Z'), at('2026-06-16T09:50:00Z'), busy)).toBe(false);
    expect(conflicts(none, at('2026-06-16T10:00:00Z'), at('2026-06-16T10:30:00Z'), [])).toBe(false);
  });

  it('minimum notice: no slot starts before now + minNoticeMinutes (exactly then is fine)', () => {
    const a = { ...base, minNoticeMinutes: 60 };
    expect(walls(freeSlots(a, [], tuesday, local('2026-06-16T09:10', berlin)), berlin)).toEqual(['10:30', '11:00', '11:30', '12:00', '12:30']);
    expect(walls(freeSlots(a, [], tuesday, local('2026-06-16T09:00', berlin)), berlin)[0]).toBe('10:00');
  });

  it('maximum days ahead: no slot starts after now + maxDaysAhead days (exactly then is fine)', () => {
    const a = { ...base, maxDaysAhead: 1 };
    const window = { from: local('2026-06-15T00:00', berlin), to: local('2026-06-18T00:00', berlin) };
    const slots = freeSlots(a, [], window, local('2026-06-15T09:00', berlin));
    expect(localStarts(slots, berlin).at(-1)).toBe('2026-06-16T09:00:00.000+02:00');
    expect(slots).toHaveLength(9);
    expect(freeSlots({ ...a, maxDaysAhead: 0 }, [], window, local('2026-06-15T09:00', berlin))).toHaveLength(1);
  });

  it('maxPerDay counts bookings by the local date of their start in the availability zone', () => {
    // 00:30 Tuesday in Berlin is still Monday in UTC.
    const early = meeting('2026-06-16T00:30', '2026-06-16T01:00');
    expect(early.start.toISOString()).toBe('2026-06-15T22:30:00.000Z');
    const window = { from: local('2026-06-15T00:00', berlin), to: local('2026-06-17T00:00', berlin) };
    const dates = (slots: Slot[]) => new Set(slots.map((s) => DateTime.fromJSDate(s.start, { zone: berlin }).toISODate()));
    expect(dates(freeSlots({ ...base, maxPerDay: 1 }, [early], window, NOW))).toEqual(new Set(['2026-06-15']));
    expect(dates(freeSlots({ ...base, maxPerDay: 2 }, [early], window, NOW))).toEqual(new Set(['2026-06-15', '2026-06-16']));
    expect(freeSlots({ ...base, maxPerDay: 0 }, [], window, NOW)).toEqual([]);
    const two = [meeting('2026-06-16T09:00', '2026-06-16T09:30'), meeting('2026-06-16T12:00', '2026-06-16T12:30')];
    expect(freeSlots({ ...base, maxPerDay: 2 }, two, tuesday, NOW)).toEqual([]);
    expect(walls(freeSlots({ ...base, maxPerDay: 3 }, two, tuesday, NOW), berlin)).toEqual(['09:30', '10:00', '10:30', '11:00', '11:30', '12:30']);
  });

  it('window bounds: start in [from, to)', () => {
    const window = (from: string, to: string) => ({ from: local(from, berlin), to: local(to, berlin) });
    expect(walls(freeSlots(base, [], window('2026-06-16T10:00', '2026-06-16T11:00'), NOW), berlin)).toEqual(['10:00', '10:30']);
    expect(walls(freeSlots(base, [], window('2026-06-16T10:15', '2026-06-16T11:00'), NOW), berlin)).toEqual(['10:30']);
    // A slot may end after `to`; only its start counts.
    expect(walls(freeSlots(base, [], window('2026-06-16T12:40', '2026-06-16T12:45'), NOW), berlin)).toEqual([]);
    expect(walls(freeSlots(base, [], window('2026-06-16T12:30', '2026-06-16T12:31'), NOW), berlin)).toEqual(['12:30']);
    expect(freeSlots(base, [], window('2026-06-16T11:00', '2026-06-16T10:00'), NOW)).toEqual([]);
  });

  it('a window longer than 62 days is clamped to from + 62 days', () => {
    const a = { ...base, weekly: every(r('09:00', '09:30')) };
    const slots = freeSlots(a, [], { from: local('2026-06-01T00:00', berlin), to: local('2026-12-31T00:00', berlin) }, NOW);
    expect(slots).toHaveLength(62);
    expect(localIso(slots.at(-1)!.start, berlin)).toBe('2026-08-01T09:00:00.000+02:00');
  });
});

describe('localIso and isValidTimeZone', () => {
  it('shows the same instant in the owner zone and in a visitor zone', () => {
    const berlin = 'Europe/Berlin';
    const a = avail({ timeZone: berlin, weekly: weekdays(r('09:00', '10:00')) });
    const [summer] = freeSlots(a, [], day('2026-06-16', berlin), NOW);
    const [winter] = freeSlots(a, [], day('2026-01-13', berlin), NOW);
    expect(localIso(summer!.start, berlin)).toBe('2026-06-16T09:00:00.000+02:00');
    expect(localIso(summer!.start, 'Asia/Tokyo')).toBe('2026-06-16T16:00:00.000+09:00');
    expect(localIso(winter!.start, berlin)).toBe('2026-01-13T09:00:00.000+01:00');
    expect(localIso(winter!.start, 'Asia/Tokyo')).toBe('2026-01-13T17:00:00.000+09:00');
    expect(localIso(at('2026-03-08T13:00:00Z'), 'America/New_York')).toBe('2026-03-08T09:00:00.000-04:00');
    expect(() => localIso(at('2026-03-08T13:00:00Z'), 'Nowhere/Land')).toThrow(RangeError);
  });

  it('accepts IANA zones only', () => {
    for (const zone of ['Europe/Berlin', 'America/New_York', 'Australia/Lord_Howe', 'Asia/Kolkata', 'UTC']) expect(isValidTimeZone(zone)).toBe(true);
    for (const zone of ['', 'Europe/Berlinn', 'Mars/Olympus_Mons', 'not a zone']) expect(isValidTimeZone(zone)).toBe(false);
  });
});

describe('isFreeSlot', () => {
  const berlin = 'Europe/Berlin';
  const a = avail({
    timeZone: berlin,
    weekly: weekdays(r('09:00', '12:00'), r('13:00', '17:00')),
    overrides: [{ date: '2026-10-23', ranges: [] }],
    intervalMinutes: 15,
    slotMinutes: 45,
    bufferBeforeMinutes: 10,
    bufferAfterMinutes: 5,
    minNoticeMinutes: 120,
    maxPerDay: 2,
  });
  const busy: Busy[] = [
    { start: local('2026-10-19T10:00', berlin), end: local('2026-10-19T10:30', berlin) },
    { start: local('2026-10-20T14:00', berlin), end: local('2026-10-20T15:00', berlin) },
    { start: local('2026-10-20T16:00', berlin), end: local('2026-10-20T16:30', berlin) },
    { start: local('2026-10-26T09:00', berlin), end: local('2026-10-26T10:00', berlin) },
  ];
  const now = local('2026-10-19T09:05', berlin);

  it('agrees with freeSlots on every 5 minutes of a week across a DST change', () => {
    const window = { from: local('2026-10-19T00:00', berlin), to: local('2026-10-28T00:00', berlin) };
    const slots = freeSlots(a, busy, window, now);
    expect(slots.length).toBeGreaterThan(50);
    const free = new Set(slots.map((s) => s.start.getTime()));
    for (const s of slots) expect(isFreeSlot(a, busy, s.start, now)).toBe(true);
    for (let t = window.from.getTime(); t < window.to.getTime(); t += 5 * MINUTE) {
      expect(isFreeSlot(a, busy, new Date(t), now), new Date(t).toISOString()).toBe(free.has(t));
    }
    // Spot checks: too early for the notice, off the grid, a conflict, a capped day, a day off.
    expect(isFreeSlot(a, busy, local('2026-10-19T11:00', berlin), now)).toBe(false);
    expect(isFreeSlot(a, busy, local('2026-10-19T11:15', berlin), now)).toBe(true);
    expect(isFreeSlot(a, busy, local('2026-10-19T11:20', berlin), now)).toBe(false);
    expect(isFreeSlot(a, busy, local('2026-10-26T10:00', berlin), now)).toBe(false);
    expect(isFreeSlot(a, busy, local('2026-10-26T10:15', berlin), now)).toBe(true);
    expect(isFreeSlot(a, busy, local('2026-10-20T09:00', berlin), now)).toBe(false);
    expect(isFreeSlot(a, busy, local('2026-10-23T09:00', berlin), now)).toBe(false);
    expect(isFreeSlot(a, busy, local('2026-10-22T09:00', berlin), now)).toBe(true);
  });
});

// ---------------------------------------------------------------------------------------------------------------------
// Property-based
// ---------------------------------------------------------------------------------------------------------------------

const ZONES = ['America/New_York', 'Europe/Berlin', 'Asia/Kolkata', 'Australia/Lord_Howe', 'UTC'] as const;
/** Instants around the 2026 DST changes of the zones above. */
const ANCHORS = [
  '2026-03-08T07:00:00Z', // New York spring forward
  '2026-11-01T06:00:00Z', // New York fall back
  '2026-03-29T01:00:00Z', // Berlin spring forward
  '2026-10-25T01:00:00Z', // Berlin fall back
  '2026-04-04T15:00:00Z', // Lord Howe fall back
  '2026-10-03T15:30:00Z', // Lord Howe spring forward
].map((iso) => new Date(iso).getTime());

const hhmm = (quarter: number) => `${String(Math.floor(quarter / 4)).padStart(2, '0')}:${String((quarter % 4) * 15).padStart(2, '0')}`;
const rangeArb = fc.integer({ min: 0, max: 95 }).chain((s) => fc.integer({ min: s + 1, max: 96 }).map((e) => r(hhmm(s), hhmm(e))));
const rangesArb = fc.array(rangeArb, { maxLength: 3 });
const weeklyArb = fc.record({ mon: rangesArb, tue: rangesArb, wed: rangesArb, thu: rangesArb, fri: rangesArb, sat: rangesArb, sun: rangesArb });

const scenarioArb = fc
  .record({
    zone: fc.constantFrom(...ZONES),
    anchor: fc.constantFrom(...ANCHORS),
    fromOffset: fc.integer({ min: -3 * 1440, max: 3 * 1440 }), // minutes from the anchor
    length: fc.integer({ min: 1, max: 14 * 1440 }), // window minutes
    nowOffset: fc.integer({ min: -3 * 1440, max: 3 * 1440 }), // minutes from `from`
    weekly: weeklyArb,
    overrides: fc.array(fc.record({ dayOffset: fc.integer({ min: -2, max: 16 }), ranges: rangesArb }), { maxLength: 3 }),
    slotMinutes: fc.constantFrom(15, 30, 45, 60, 90),
    intervalMinutes: fc.constantFrom(15, 30, 60),
    bufferBeforeMinutes: fc.integer({ min: 0, max: 60 }),
    bufferAfterMinutes: fc.integer({ min: 0, max: 60 }),
    minNoticeMinutes: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 2880 })),
    maxDaysAhead: fc.integer({ min: 0, max: 30 }),
    maxPerDay: fc.option(fc.integer({ min: 0, max: 3 }), { nil: null }),
    // Bookings on the 5-minute grid (so touching ends happen), relative to `from`.
    busy: fc.array(fc.record({ offset: fc.integer({ min: -288, max: 15 * 288 }), length: fc.integer({ min: 1, max: 36 }) }), { maxLength: 10 }),
    candidate: fc.record({ at: fc.nat(), snap: fc.boolean() }),
  })
  .map((p) => {
    const from = p.anchor + p.fromOffset * MINUTE;
    const to = from + p.length * MINUTE;
    const firstDate = DateTime.fromMillis(from, { zone: p.zone }).toISODate()!;
    const a: Availability = {
      timeZone: p.zone,
      weekly: p.weekly,
      overrides: p.overrides.map((o) => ({ date: DateTime.fromISO(firstDate).plus({ days: o.dayOffset }).toISODate()!, ranges: o.ranges })),
      slotMinutes: p.slotMinutes,
      intervalMinutes: p.intervalMinutes,
      bufferBeforeMinutes: p.bufferBeforeMinutes,
      bufferAfterMinutes: p.bufferAfterMinutes,
      minNoticeMinutes: p.minNoticeMinutes,
      maxDaysAhead: p.maxDaysAhead,
      maxPerDay: p.maxPerDay,
    };
    const busy: Busy[] = p.busy.map((b) => ({ start: new Date(from + b.offset * 5 * MINUTE), end: new Date(from + (b.offset + b.length) * 5 * MINUTE) }));
    // A candidate start inside the window; mostly snapped to the quarter-hour grid, where free slots can be.
    let candidate = from + (p.candidate.at % p.length) * MINUTE;
    const snapped = Math.floor(candidate / (15 * MINUTE)) * 15 * MINUTE;
    if (p.candidate.snap && snapped >= from) candidate = snapped;
    return { a, busy, window: { from: new Date(from), to: new Date(to) }, now: new Date(from + p.nowOffset * MINUTE), candidate: new Date(candidate) };
  });

/** The conflict rule written out independently of the implementation. */
const refConflicts = (a: Availability, s: number, e: number, busy: readonly Busy[]) =>
  busy.some((b) => {
    const [bs, be, before, after] = [b.start.getTime(), b.end.getTime(), a.bufferBeforeMinutes * MINUTE, a.bufferAfterMinutes * MINUTE];
    return (s - before < be && bs < e + after) || (s < be + after && bs - before < e);
  });

/** The instants of a local date's ranges, built with DateTime.fromObject (not the implementation's fromISO path). */
function rangeInstants(a: Availability, date: string): Array<[number, number]> {
  const d = DateTime.fromISO(date, { zone: 'utc' });
  const ranges = a.overrides.filter((o) => o.date === date).at(-1)?.ranges ?? a.weekly[WEEKDAYS[d.weekday - 1]!];
  const instant = (wall: string) => {
    const [h, m] = wall.split(':').map(Number) as [number, number];
    const base = h === 24 ? d.plus({ days: 1 }) : d;
    return DateTime.fromObject({ year: base.year, month: base.month, day: base.day, hour: h % 24, minute: m }, { zone: a.timeZone }).toMillis();
  };
  return ranges.map((x) => [instant(x.start), instant(x.end)]);
}

/** Brute force: every quarter-hour instant of the window (all zones here have quarter-hour offsets), judged on its own. */
function referenceStarts(a: Availability, busy: readonly Busy[], window: { from: Date; to: Date }, now: Date): number[] {
  const out: number[] = [];
  const q = 15 * MINUTE;
  const rangesOf = new Map<string, Array<[number, number]>>();
  const starts = busy.map((b) => DateTime.fromJSDate(b.start, { zone: a.timeZone }).toISODate());
  for (let t = Math.ceil(window.from.getTime() / q) * q; t < window.to.getTime(); t += q) {
    const e = t + a.slotMinutes * MINUTE;
    if (t < now.getTime() + a.minNoticeMinutes * MINUTE || t > now.getTime() + a.maxDaysAhead * DAY) continue;
    const date = DateTime.fromMillis(t, { zone: a.timeZone }).toISODate()!;
    if (a.maxPerDay !== null && starts.filter((d) => d === date).length >= a.maxPerDay) continue;
    if (!rangesOf.has(date)) rangesOf.set(date, rangeInstants(a, date));
    const onGrid = rangesOf.get(date)!.some(([rs, re]) => rs <= t && e <= re && (t - rs) % (a.intervalMinutes * MINUTE) === 0);
    if (onGrid && !refConflicts(a, t, e, busy)) out.push(t);
  }
  return out;
}

describe('properties', () => {
  it('slots are exact-length, sorted, unique, free, inside the window and limits, and inside a range of their local date', () => {
    fc.assert(
      fc.property(scenarioArb, ({ a, busy, window, now }) => {
        const slots = freeSlots(a, busy, window, now);
        let previous = Number.NEGATIVE_INFINITY;
        for (const slot of slots) {
          const s = slot.start.getTime();
          const e = slot.end.getTime();
          expect(e - s).toBe(a.slotMinutes * MINUTE);
          expect(s).toBeGreaterThan(previous);
          previous = s;
          expect(refConflicts(a, s, e, busy)).toBe(false);
          expect(conflicts(a, slot.start, slot.end, busy)).toBe(false);
          expect(s).toBeGreaterThanOrEqual(window.from.getTime());
          expect(s).toBeLessThan(window.to.getTime());
          expect(s).toBeGreaterThanOrEqual(now.getTime() + a.minNoticeMinutes * MINUTE);
          expect(s).toBeLessThanOrEqual(now.getTime() + a.maxDaysAhead * DAY);
          const date = DateTime.fromJSDate(slot.start, { zone: a.timeZone }).toISODate()!;
          expect(rangeInstants(a, date).some(([rs, re]) => rs <= s && e <= re)).toBe(true);
          expect(isFreeSlot(a, busy, slot.start, now)).toBe(true);
        }
      }),
      { numRuns: 100 },
    );
  });

  it('freeSlots equals a brute-force reference, and isFreeSlot of any candidate start agrees with it', () => {
    fc.assert(
      fc.property(scenarioArb, ({ a, busy, window, now, candidate }) => {
        const slots = freeSlots(a, busy, window, now);
        expect(slots.map((s) => s.start.getTime())).toEqual(referenceStarts(a, busy, window, now));
        const returned = slots.some((s) => s.start.getTime() === candidate.getTime());
        expect(isFreeSlot(a, busy, candidate, now)).toBe(returned);
      }),
      { numRuns: 100 },
    );
  });
});
