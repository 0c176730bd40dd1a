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

const DAY = '(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)';
const MONTH = '(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)';
const TIME = '\\d{2}:\\d{2}:\\d{2}';
/** HTTP-date (RFC 9110 §5.6.7): IMF-fixdate, or the obsolete RFC 850 and asctime forms (the latter without a zone). */
const HTTP_DATE = new RegExp(
  `^(?:${DAY}, \\d{2} ${MONTH} \\d{4} ${TIME} GMT|(?:Mon|Tues|Wednes|Thurs|Fri|Satur|Sun)day, \\d{2}-${MONTH}-\\d{2} ${TIME} GMT|(${DAY} ${MONTH} [ \\d]\\d ${TIME} \\d{4}))$`,
);

/** Seconds or an HTTP date (RFC 9110 §10.2.3), as milliseconds from `now`; undefined when absent or invalid. */
export function parseRetryAfter(value: string | string[] | undefined, now: Date): number | undefined {
  const raw = (Array.isArray(value) ? value[0] : value)?.trim();
  if (!raw) return undefined;
  if (/^\d+$/.test(raw)) return Number(raw) * 1000;
  // Date.parse alone accepts far more than HTTP-date ('1.5', '-5', '1 1 2099' are dates to it).
  const match = HTTP_DATE.exec(raw);
  if (!match) return undefined;
  const at = Date.parse(match[1] ? `${raw} GMT` : raw); // asctime is GMT too, not local time
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
