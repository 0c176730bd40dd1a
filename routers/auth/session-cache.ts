import type { OwnerPrincipal } from './principal.ts';

/** A validated session as the caller resolver needs it: no token, only the id lucia stores (the token's SHA-256). */
export interface ValidSession {
  sessionId: string;
  /** Epoch milliseconds; past it the session is not served from memory, whatever the entry's own lifetime. */
  expiresAt: number;
  owner: Readonly<OwnerPrincipal>;
}

/**
 * Validated owner sessions, by session id (the SHA-256 of the bearer token: the token itself is never kept), so an
 * owner's request skips the session statement.
 *
 * Invariants (a signed-out, revoked or expired session, and an owner changed, disabled or deleted, must show on the
 * next request):
 * - entries are served only while the cache is live, i.e. while change notifications are known to arrive
 *   (database.listen); a lost listening connection empties and suspends it until listening again;
 * - a notification naming an owner drops that owner's sessions, one naming nobody (TRUNCATE) empties it, and the
 *   instance's own writes do the same directly on commit;
 * - a lookup that started before any invalidation never stores its possibly stale answer (generation check);
 * - only valid sessions are stored: made-up tokens cannot fill it;
 * - an entry is never served past the session's own expiry, nor after `ttlMs`, and the least recently used go first
 *   beyond `maxEntries`.
 */
export interface SessionCache {
  /** The cached session, or the loader's answer (stored when it is safe to). */
  lookup(sessionId: string, load: () => Promise<ValidSession | undefined>): Promise<ValidSession | undefined>;
  forgetSession(sessionId: string): void;
  forgetOwner(ownerId: string): void;
  invalidate(): void;
  /** false: notifications may be missed, so nothing is served or stored until true again. */
  setLive(live: boolean): void;
  readonly size: number;
}

export function createSessionCache(options: { ttlMs: number; maxEntries: number; now?: () => number }): SessionCache {
  const now = options.now ?? Date.now;
  const entries = new Map<string, { session: ValidSession; storedUntil: number }>();
  // Which cached sessions belong to whom, so a change to one owner leaves everyone else's entries in place.
  const byOwner = new Map<string, Set<string>>();
  let generation = 0;
  let live = false;
  const enabled = () => live && options.ttlMs > 0 && options.maxEntries > 0;

  const remove = (sessionId: string) => {
    const entry = entries.get(sessionId);
    if (!entry) return;
    entries.delete(sessionId);
    const ids = byOwner.get(entry.session.owner.id);
    ids?.delete(sessionId);
    if (ids?.size === 0) byOwner.delete(entry.session.owner.id);
  };

  const clear = () => {
    generation++;
    entries.clear();
    byOwner.clear();
  };

  return {
    async lookup(sessionId, load) {
      if (enabled()) {
        const entry = entries.get(sessionId);
        if (entry) {
          const at = now();
          if (entry.storedUntil > at && entry.session.expiresAt > at) {
            // Re-inserted so that Map order is least recently used first.
            entries.delete(sessionId);
            entries.set(sessionId, entry);
            return entry.session;
          }
          remove(sessionId);
        }
      }
      const startedAt = generation;
      const session = await load();
      if (session && enabled() && generation === startedAt) {
        remove(sessionId);
        entries.set(sessionId, { session, storedUntil: now() + options.ttlMs });
        const ids = byOwner.get(session.owner.id);
        if (ids) ids.add(sessionId);
        else byOwner.set(session.owner.id, new Set([sessionId]));
        if (entries.size > options.maxEntries) remove(entries.keys().next().value!);
      }
      return session;
    },
    forgetSession(sessionId) {
      generation++;
      remove(sessionId);
    },
    forgetOwner(ownerId) {
      generation++;
      for (const sessionId of [...(byOwner.get(ownerId) ?? [])]) remove(sessionId);
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
