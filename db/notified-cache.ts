/**
 * An in-memory cache of database reads that is kept right by change notifications (database.listen): the API-key
 * lookups and the owners' key lists use it.
 *
 * Invariants (a change committed anywhere must show on the next read that follows its notification, and at once on
 * the instance that made it):
 * - entries are served only while the cache is live, i.e. while change notifications are known to arrive; a lost
 *   listening connection empties and suspends it until listening again;
 * - a notification (or the instance's own write, on commit) forgets the entry it names, or everything;
 * - a load that started before any forgetting never stores its possibly stale answer (one generation for the
 *   whole cache: a change elsewhere costs at most a miss, never a stale entry);
 * - only what `storable` accepts is stored (by default anything but undefined: made-up keys cannot fill it);
 * - entries expire after `ttlMs` whatever happens, and the least recently used go first beyond `maxEntries`.
 */
export interface NotifiedCache<V> {
  /** The cached value, or the loader's answer (stored when it is safe to). */
  lookup(key: string, load: () => Promise<V | undefined>): Promise<V | undefined>;
  forget(key: string): void;
  invalidate(): void;
  /** false: notifications may be missed, so nothing is served or stored until true again. */
  setLive(live: boolean): void;
  readonly size: number;
}

export interface NotifiedCacheOptions<V> {
  ttlMs: number;
  maxEntries: number;
  storable?: (value: V) => boolean;
  now?: () => number;
}

export function createNotifiedCache<V>(options: NotifiedCacheOptions<V>): NotifiedCache<V> {
  const now = options.now ?? Date.now;
  const storable = options.storable ?? (() => true);
  const entries = new Map<string, { value: V; expiresAt: number }>();
  let generation = 0;
  let live = false;
  const enabled = () => live && options.ttlMs > 0 && options.maxEntries > 0;
  const clear = () => {
    generation++;
    entries.clear();
  };

  return {
    async lookup(key, load) {
      if (enabled()) {
        const entry = entries.get(key);
        if (entry && entry.expiresAt > now()) {
          // Re-inserted so that Map order is least recently used first.
          entries.delete(key);
          entries.set(key, entry);
          return entry.value;
        }
        if (entry) entries.delete(key);
      }
      const startedAt = generation;
      const value = await load();
      if (value !== undefined && enabled() && generation === startedAt && storable(value)) {
        entries.delete(key);
        entries.set(key, { value, expiresAt: now() + options.ttlMs });
        if (entries.size > options.maxEntries) entries.delete(entries.keys().next().value!);
      }
      return value;
    },
    forget(key) {
      generation++;
      entries.delete(key);
    },
    invalidate: clear,
    setLive(value) {
      clear();
      live = value;
    },
    get size() {
      return entries.size;
    },
  };
}
