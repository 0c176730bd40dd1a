import { AppError } from '../../schema/errors.ts';
import { MAX_RANGE_DAYS } from '../../schema/dashboard.ts';
import { parseCalendarInstant } from '../../schema/common.ts';

const DAY_MS = 86_400_000;
const DEFAULT_DAYS = 30;

export interface DayRange {
  from: string;
  to: string;
}

const isoDay = (ms: number) => new Date(ms).toISOString().slice(0, 10);

/** A date or an instant as its UTC day, in ms; a day that does not exist (2026-02-30, also in an instant) is a 400. */
function dayMs(value: string, field: 'from' | 'to'): number {
  const ms = parseCalendarInstant(value.length === 10 ? `${value}T00:00:00Z` : value);
  if (Number.isNaN(ms)) {
    throw new AppError('VALIDATION_FAILED', 'Invalid request parameters', `${field}: not a real date`);
  }
  const day = Math.floor(ms / DAY_MS) * DAY_MS;
  if (day < Date.UTC(2000, 0, 1) || day > Date.UTC(9000, 0, 1)) {
    throw new AppError('VALIDATION_FAILED', 'Invalid request parameters', `${field}: must be between 2000 and 9000`);
  }
  return day;
}

/** The UTC days a report covers, both included: the last 30 days unless asked otherwise, at most MAX_RANGE_DAYS. */
export function resolveRange(input: { from?: string; to?: string }, now: Date): DayRange {
  const to = input.to ? dayMs(input.to, 'to') : Math.floor(now.getTime() / DAY_MS) * DAY_MS;
  const from = input.from ? dayMs(input.from, 'from') : to - (DEFAULT_DAYS - 1) * DAY_MS;
  if (from > to) throw new AppError('VALIDATION_FAILED', 'Invalid request parameters', 'from: must not be after to');
  if ((to - from) / DAY_MS + 1 > MAX_RANGE_DAYS) {
    throw new AppError('VALIDATION_FAILED', 'Invalid request parameters', `from: the range may cover at most ${MAX_RANGE_DAYS} days`);
  }
  return { from: isoDay(from), to: isoDay(to) };
}

/** The first day of every period of the range, in order (weeks start on Monday, as PostgreSQL's date_trunc). */
export function periodsOf(range: DayRange, grouping: 'day' | 'week' | 'month'): string[] {
  const start = Date.parse(`${range.from}T00:00:00Z`);
  const end = Date.parse(`${range.to}T00:00:00Z`);
  const periods: string[] = [];
  if (grouping === 'month') {
    const d = new Date(start);
    let cursor = Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1);
    while (cursor <= end) {
      periods.push(isoDay(cursor));
      const c = new Date(cursor);
      cursor = Date.UTC(c.getUTCFullYear(), c.getUTCMonth() + 1, 1);
    }
    return periods;
  }
  const step = grouping === 'week' ? 7 * DAY_MS : DAY_MS;
  // getUTCDay: Sunday 0; the Monday on or before the first day.
  let cursor = grouping === 'week' ? start - ((new Date(start).getUTCDay() + 6) % 7) * DAY_MS : start;
  for (; cursor <= end; cursor += step) periods.push(isoDay(cursor));
  return periods;
}

/** The first day of the period a day falls in. */
export function periodStartOf(day: string, grouping: 'day' | 'week' | 'month'): string {
  if (grouping === 'day') return day;
  if (grouping === 'month') return `${day.slice(0, 8)}01`;
  const ms = Date.parse(`${day}T00:00:00Z`);
  return isoDay(ms - ((new Date(ms).getUTCDay() + 6) % 7) * DAY_MS);
}
