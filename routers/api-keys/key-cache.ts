import type { ActiveKey } from './repository.ts';

/**
 * Validated API keys, by the SHA-256 of the key, so a visitor's chat skips the lookup statement.
 *
 * Invariants (a deactivated or deleted key must be refused on the next request):
 * - entries are served only while the cache is live, i.e. while change notifications are known to arrive
 *   (database.listen); a lost listening connection empties and suspends it until listening again;
 * - every change notification (and the instance's own writes, which invalidate directly on commit) empties it;
 * - a lookup that started before an invalidation never stores its possibly stale answer (generation check);
 * - only keys that exist and are active are stored: unknown keys cannot fill it;
 * - entries expire after `ttlMs` whatever happens, and the oldest go first beyond `maxEntries`.
 */
export interface ApiKeyCache {
  /** The cached key, or the loader's answer (stored when it is safe to). */
  lookup(keyHash: string, load: () => Promise<ActiveKey | undefined>): Promise<ActiveKey | undefined>;
  invalidate(): void;
  /** false: notifications may be missed, so nothing is served or stored until true again. */
  setLive(live: boolean): void;
}

export function createApiKeyCache(options: { ttlMs: number; maxEntries: number; now?: () => number }): ApiKeyCache {
  const now = options.now ?? Date.now;
  const entries = new Map<string, { key: ActiveKey; expiresAt: number }>();
  let generation = 0;
  let live = false;
  const enabled = () => live && options.ttlMs > 0;

  return {
    async lookup(keyHash, load) {
      if (enabled()) {
        const entry = entries.get(keyHash);
        if (entry && entry.expiresAt > now()) return entry.key;
        if (entry) entries.delete(keyHash);
      }
      const startedAt = generation;
      const key = await load();
      if (key && enabled() && generation === startedAt) {
        entries.delete(keyHash);
        entries.set(keyHash, { key, expiresAt: now() + options.ttlMs });
        if (entries.size > options.maxEntries) entries.delete(entries.keys().next().value!);
      }
      return key;
    },
    invalidate() {
      generation++;
      entries.clear();
    },
    setLive(value) {
      generation++;
      entries.clear();
      live = value;
    },
  };
}
