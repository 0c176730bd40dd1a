import { describe, expect, it } from 'vitest';
import { MAX_ATTEMPTS, nextAttemptDelay, parseRetryAfter, RETRY_DELAYS_MS } from './schedule.ts';

const SECOND = 1_000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;
/** The documented schedule: the delay before attempt n + 1 after n attempts. */
const DELAYS = [5 * SECOND, 5 * MINUTE, 30 * MINUTE, 2 * HOUR, 5 * HOUR, 10 * HOUR, 10 * HOUR];
/** Largest value Math.random can return. */
const ALMOST_ONE = 1 - Number.EPSILON;

/** Every delay from the first failure to exhaustion, with the given random source. */
function schedule(random: () => number): number[] {
  const delays: number[] = [];
  for (let made = 1; ; made++) {
    const delay = nextAttemptDelay(made, undefined, random);
    if (delay === undefined) return delays;
    delays.push(delay);
    if (made > 100) throw new Error('the schedule never ends');
  }
}

describe('retry schedule', () => {
  it('makes 8 attempts in all: 7 delays after the first, then exhausted', () => {
    expect(MAX_ATTEMPTS).toBe(8);
    expect([...RETRY_DELAYS_MS]).toEqual(DELAYS);
    expect(schedule(() => 0.5)).toHaveLength(7);
    expect(nextAttemptDelay(7, undefined, () => 0.5)).toBe(10 * HOUR);
    expect(nextAttemptDelay(8, undefined, () => 0.5)).toBeUndefined();
    expect(nextAttemptDelay(9, undefined, () => 0.5)).toBeUndefined();
    // Exhausted means exhausted: a Retry-After does not buy another attempt.
    expect(nextAttemptDelay(8, 60 * SECOND, () => 0.5)).toBeUndefined();
  });

  it('without jitter (random 0.5) the delays are exactly 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h', () => {
    expect(schedule(() => 0.5)).toEqual(DELAYS);
  });

  it('jitter stays within ±10 % of each delay, reaching both ends', () => {
    const low = schedule(() => 0);
    const high = schedule(() => ALMOST_ONE);
    DELAYS.forEach((base, i) => {
      expect(low[i]).toBe(Math.round(base * 0.9));
      expect(high[i]).toBeGreaterThan(base * 1.09);
      expect(high[i]).toBeLessThanOrEqual(Math.round(base * 1.1));
    });
    // Math.random itself: many draws, every one inside the band, and not all the same.
    for (let made = 1; made <= 7; made++) {
      const base = DELAYS[made - 1]!;
      const seen = new Set<number>();
      for (let i = 0; i < 200; i++) {
        const delay = nextAttemptDelay(made, undefined)!;
        expect(delay).toBeGreaterThanOrEqual(Math.round(base * 0.9));
        expect(delay).toBeLessThanOrEqual(Math.round(base * 1.1));
        seen.add(delay);
      }
      expect(seen.size).toBeGreaterThan(1);
    }
  });

  it('the smallest possible total (every delay −10 %) is still at least 24 h', () => {
    const smallest = schedule(() => 0).reduce((a, b) => a + b, 0);
    expect(smallest).toBeGreaterThanOrEqual(24 * HOUR);
    const largest = schedule(() => ALMOST_ONE).reduce((a, b) => a + b, 0);
    expect(largest).toBeLessThanOrEqual(Math.round(DELAYS.reduce((a, b) => a + b, 0) * 1.1) + DELAYS.length);
  });
});

describe('Retry-After', () => {
  const now = new Date('2026-03-04T05:06:07.000Z');

  it('parses delay-seconds', () => {
    expect(parseRetryAfter('120', now)).toBe(120 * SECOND);
    expect(parseRetryAfter('0', now)).toBe(0);
    expect(parseRetryAfter(' 30 ', now)).toBe(30 * SECOND);
    // Several header lines: the first one counts.
    expect(parseRetryAfter(['7', '900'], now)).toBe(7 * SECOND);
  });

  it('parses an HTTP-date as the time left until then (0 when already past)', () => {
    expect(parseRetryAfter(new Date(now.getTime() + 90 * SECOND).toUTCString(), now)).toBe(90 * SECOND);
    expect(parseRetryAfter('Wed, 04 Mar 2026 07:06:07 GMT', now)).toBe(2 * HOUR);
    expect(parseRetryAfter(new Date(now.getTime() - HOUR).toUTCString(), now)).toBe(0);
    // The obsolete forms recipients must still accept (RFC 9110 §5.6.7).
    expect(parseRetryAfter('Wednesday, 04-Mar-26 05:16:07 GMT', now)).toBe(10 * MINUTE);
    expect(parseRetryAfter('Wed Mar  4 05:07:07 2026', now)).toBe(MINUTE);
  });

  it('is undefined when absent or invalid', () => {
    for (const value of [undefined, '', '   ', [], 'soon', '12abc', '120s', '-5', '1.5', '1e3', '0x10', 'tomorrow', '2026-03-04T06:00:00Z', '1 1 2099']) {
      expect(parseRetryAfter(value as string | string[] | undefined, now), JSON.stringify(value)).toBeUndefined();
    }
  });

  it('a Retry-After longer than the scheduled delay wins', () => {
    expect(nextAttemptDelay(1, 120 * SECOND, () => 0.5)).toBe(120 * SECOND);
    expect(nextAttemptDelay(1, 120 * SECOND, () => ALMOST_ONE)).toBe(120 * SECOND);
    expect(nextAttemptDelay(3, 3 * HOUR, () => 0)).toBe(3 * HOUR);
  });

  it('is capped at 10 h', () => {
    expect(nextAttemptDelay(1, 24 * HOUR, () => 0.5)).toBe(10 * HOUR);
    expect(nextAttemptDelay(2, 10 * HOUR + 1, () => 0.5)).toBe(10 * HOUR);
    expect(nextAttemptDelay(1, parseRetryAfter('99999999', now), () => 0.5)).toBe(10 * HOUR);
    // The cap never shortens the schedule itself: a +10 % jittered 10 h gap stays above 10 h.
    expect(nextAttemptDelay(7, 48 * HOUR, () => ALMOST_ONE)).toBeGreaterThan(10 * HOUR);
  });

  it('a Retry-After shorter than the scheduled delay does not shorten it', () => {
    expect(nextAttemptDelay(1, 1 * SECOND, () => 0.5)).toBe(5 * SECOND);
    expect(nextAttemptDelay(1, 0, () => 0)).toBe(4_500);
    expect(nextAttemptDelay(4, 30 * MINUTE, () => 0.5)).toBe(2 * HOUR);
    expect(nextAttemptDelay(6, HOUR, () => 0)).toBe(9 * HOUR);
  });
});
