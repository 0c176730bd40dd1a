import { describe, expect, it } from 'vitest';
import { parseCalendarInstant } from './common.ts';

describe('parseCalendarInstant', () => {
  it('reads dates and date-times as Date.parse does', () => {
    expect(parseCalendarInstant('2026-02-28T10:00:00Z')).toBe(Date.UTC(2026, 1, 28, 10));
    expect(parseCalendarInstant('2028-02-29')).toBe(Date.UTC(2028, 1, 29));
    expect(parseCalendarInstant('2026-11-01T23:30:00-02:00')).toBe(Date.UTC(2026, 10, 2, 1, 30));
  });

  it('refuses a calendar day that does not exist instead of rolling it over', () => {
    for (const value of [
      '2026-02-30T10:00:00Z',
      '2026-02-29',
      '2026-04-31T00:00:00+02:00',
      '2026-13-01T00:00:00Z',
      'tomorrow',
      '2026-02-30 10:00:00Z',
      '2026-02-30t10:00:00z',
      '+002026-02-30T10:00:00Z',
      '2026/02/30 10:00',
      'Feb 30 2026 10:00 UTC',
      'Feb 28 2026',
    ]) {
      expect(parseCalendarInstant(value), value).toBeNaN();
    }
  });
});
