import { describe, expect, it } from 'vitest';
import { AppError } from '../../schema/errors.ts';
import { periodsOf, resolveRange } from './range.ts';

const now = new Date('2026-11-25T21:00:00Z');

describe('report ranges', () => {
  it('defaults to the last 30 UTC days, today included', () => {
    expect(resolveRange({}, now)).toEqual({ from: '2026-10-27', to: '2026-11-25' });
    expect(resolveRange({ to: '2026-01-30' }, now)).toEqual({ from: '2026-01-01', to: '2026-01-30' });
  });

  it('reads instants as their UTC day', () => {
    expect(resolveRange({ from: '2026-11-01T23:30:00-02:00', to: '2026-11-03T00:10:00+01:00' }, now)).toEqual({ from: '2026-11-02', to: '2026-11-02' });
  });

  it('refuses days that do not exist, reversed ranges and ranges past 367 days', () => {
    const refused = (input: { from?: string; to?: string }) => {
      try {
        resolveRange(input, now);
      } catch (error) {
        expect(error).toBeInstanceOf(AppError);
        return (error as AppError).details;
      }
      throw new Error('accepted');
    };
    expect(refused({ from: '2026-02-29' })).toContain('from');
    expect(refused({ from: '2026-02-30T00:00:00Z' })).toContain('from');
    expect(refused({ to: '2026-13-01T10:00:00+02:00' })).toContain('to');
    expect(refused({ from: '2026-03-02', to: '2026-03-01' })).toContain('after');
    expect(refused({ from: '2025-01-01', to: '2026-01-03' })).toContain('367');
    expect(resolveRange({ from: '2024-01-01', to: '2025-01-01' }, now)).toEqual({ from: '2024-01-01', to: '2025-01-01' });
  });

  it('lists the periods: days, Monday weeks and months', () => {
    const range = { from: '2026-11-25', to: '2026-12-02' };
    expect(periodsOf(range, 'day')).toHaveLength(8);
    expect(periodsOf(range, 'week')).toEqual(['2026-11-23', '2026-11-30']);
    expect(periodsOf(range, 'month')).toEqual(['2026-11-01', '2026-12-01']);
    expect(periodsOf({ from: '2024-01-31', to: '2024-03-01' }, 'month')).toEqual(['2024-01-01', '2024-02-01', '2024-03-01']);
  });
});
