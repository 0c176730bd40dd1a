/**
 * An in-memory cache of database reads that is kept right by change notifications (database.listen): the API-key
 * lookups, the owners' key lists and the owner sessions use it.
 *
 * Invariants (a change committed anywhere must show on the next read that follows its notification, and at once on
 * the instance that made it):
 * - entries are served only while the cache is live, i.e. while change notifications are known to arrive; a lost
 *   listening connection empties and suspends it until listening again;
 * - a notification (or the instance's own write, on commit) forgets the entry it names, the entries whose values
 *   match (forgetWhere), or everything;
 * - a load that started before its key was forgotten, or before a forgetWhere or the whole cache was forgotten, never
 *   stores its possibly stale answer (a busy owner's changes to their own keys do not keep everyone else's loads from
 *   being stored);
 * - only what `storable` accepts is stored (by default anything but undefined: made-up keys cannot fill it);
 * - entries expire after `ttlMs` whatever happens (and are not served once `fresh` says so), and the least recently
 *   used go first beyond `maxEntries`.
 */
export interface NotifiedCache<V> {
  /** The cached value, or the loader's answer (stored when it is safe to). */
  lookup(key: string, load: () => Promise<V | undefined>): Promise<V | undefined>;
  forget(key: string): void;
  /** Forgets every entry whose value matches, and keeps every load in flight from being stored (whose it is is unknown). */
  forgetWhere(matches: (value: V) => boolean): void;
  invalidate(): void;
  /** false: notifications may be missed, so nothing is served or stored until true again. */
  setLive(live: boolean): void;
  readonly size: number;
}

export interface NotifiedCacheOptions<V> {
  ttlMs: number;
  maxEntries: number;
  storable?: (value: V) => boolean;
  /** Checked on every hit: false drops the entry and loads again (a session past its own expiry). */
  fresh?: (value: V, now: number) => boolean;
  now?: () => number;
}

const MAX_FORGOTTEN_IN_FLIGHT = 10_000;

export function createNotifiedCache<V>(options: NotifiedCacheOptions<V>): NotifiedCache<V> {
  const now = options.now ?? Date.now;
  const storable = options.storable ?? (() => true);
  const fresh = options.fresh ?? (() => true);
  const entries = new Map<string, { value: V; expiresAt: number }>();
  // Bumped when everything is forgotten: no load that started earlier stores its answer.
  let generation = 0;
  // Per-key forgetting while loads are in flight: the `forgets` count at a key's last forget. Emptied whenever no
  // load is in flight (nothing can be stale then); past its bound, a whole-cache forget replaces it.
  let forgets = 0;
  const forgottenAt = new Map<string, number>();
  let inFlight = 0;
  let live = false;
  const enabled = () => live && options.ttlMs > 0 && options.maxEntries > 0;
  const clear = () => {
    generation++;
    entries.clear();
    forgottenAt.clear();
  };

  return {
    async lookup(key, load) {
      if (enabled()) {
        const entry = entries.get(key);
        const at = now();
        if (entry && entry.expiresAt > at && fresh(entry.value, at)) {
          // Re-inserted so that Map order is least recently used first.
          entries.delete(key);
          entries.set(key, entry);
          return entry.value;
        }
        if (entry) entries.delete(key);
      }
      const startedAt = generation;
      const forgetsAtStart = forgets;
      inFlight++;
      let value: V | undefined;
      let forgottenSince: boolean;
      try {
        value = await load();
      } finally {
        forgottenSince = generation !== startedAt || (forgottenAt.get(key) ?? 0) > forgetsAtStart;
        if (--inFlight === 0) forgottenAt.clear();
      }
      if (value !== undefined && enabled() && !forgottenSince && storable(value)) {
        entries.delete(key);
        entries.set(key, { value, expiresAt: now() + options.ttlMs });
        if (entries.size > options.maxEntries) entries.delete(entries.keys().next().value!);
      }
      return value;
    },
    forget(key) {
      entries.delete(key);
      if (inFlight === 0) return;
      forgottenAt.set(key, ++forgets);
      if (forgottenAt.size > MAX_FORGOTTEN_IN_FLIGHT) clear();
    },
    forgetWhere(matches) {
      generation++;
      forgottenAt.clear();
      for (const [key, entry] of entries) if (matches(entry.value)) entries.delete(key);
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
