import type { Logger } from '../logger.ts';
import type { RateLimiter } from './rate-limiter.ts';

/**
 * Redis-backed counting with a local fallback: when Redis cannot answer, limits are still enforced per
 * instance (stricter than nothing, looser than shared) instead of failing every request or none.
 */
export function withFallback(primary: RateLimiter, fallback: RateLimiter, logger: Logger): RateLimiter {
  let degraded = false;
  return {
    async hit(key, limit, windowMs) {
      try {
        const decision = await primary.hit(key, limit, windowMs);
        if (degraded) logger.info('rate limiter: shared store is back');
        degraded = false;
        return decision;
      } catch (error) {
        if (!degraded) logger.warn('rate limiter: shared store unavailable, counting per instance', { reason: (error as Error).message });
        degraded = true;
        return fallback.hit(key, limit, windowMs);
      }
    },
    health: () => primary.health(),
    // What this instance counted while Redis was away is better than no answer; the snapshot names the store.
    async busiest(options) {
      try {
        return await primary.busiest(options);
      } catch (error) {
        logger.warn('rate limiter: shared store unavailable, showing the counts of this instance', { reason: (error as Error).message });
        return fallback.busiest(options);
      }
    },
    async close() {
      await Promise.all([primary.close(), fallback.close()]);
    },
  };
}
