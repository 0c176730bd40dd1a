/**
 * When automatic delivery attempts happen. Eight attempts: at once, then after 5 s, 5 min, 30 min, 2 h, 5 h,
 * 10 h and 10 h (about 27.6 h in all), each delay with ±10 % jitter so a receiver coming back is not hit by
 * every retry at the same instant. The smallest possible total (−10 % on each) is still above 24 h.
 */
export const RETRY_DELAYS_MS = [5_000, 5 * 60_000, 30 * 60_000, 2 * 3_600_000, 5 * 3_600_000, 10 * 3_600_000, 10 * 3_600_000] as const;
export const MAX_ATTEMPTS = RETRY_DELAYS_MS.length + 1;
const JITTER = 0.1;
/** A Retry-After longer than this is not followed literally: the longest scheduled gap applies instead. */
const MAX_RETRY_AFTER_MS = 10 * 3_600_000;

/** Seconds or an HTTP date (RFC 9110 §10.2.3), as milliseconds from `now`; undefined when absent or invalid. */
export function parseRetryAfter(value: string | string[] | undefined, now: Date): number | undefined {
  const raw = (Array.isArray(value) ? value[0] : value)?.trim();
  if (!raw) return undefined;
  if (/^\d+$/.test(raw)) return Number(raw) * 1000;
  const at = Date.parse(raw);
  if (Number.isNaN(at)) return undefined;
  return Math.max(0, at - now.getTime());
}

/**
 * The delay before the next automatic attempt after `attemptsMade` attempts (1-based count of those made),
 * or undefined when the schedule is exhausted. A Retry-After asks for at least that long (bounded).
 */
export function nextAttemptDelay(attemptsMade: number, retryAfterMs: number | undefined, random: () => number = Math.random): number | undefined {
  if (attemptsMade >= MAX_ATTEMPTS) return undefined;
  const base = RETRY_DELAYS_MS[attemptsMade - 1];
  if (base === undefined) return undefined;
  const jittered = Math.round(base * (1 - JITTER + random() * 2 * JITTER));
  if (retryAfterMs === undefined) return jittered;
  return Math.max(jittered, Math.min(retryAfterMs, MAX_RETRY_AFTER_MS));
}
