import { createNotifiedCache } from '../../db/notified-cache.ts';
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
 * owner's request skips the session statement. A notified cache (db/notified-cache.ts, whose invariants hold here:
 * served only while change notifications arrive, a load that raced a change never stored, only valid sessions
 * stored, `ttlMs` and `maxEntries` bounds), plus: a notification naming an owner drops that owner's sessions and
 * keeps every load in flight from being stored (a signed-out, revoked or expired session, and an owner changed,
 * disabled or deleted, show on the next request); and an entry is never served past the session's own expiry.
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
  const cache = createNotifiedCache<ValidSession>({ ...options, fresh: (session, now) => session.expiresAt > now });
  return {
    lookup: (sessionId, load) => cache.lookup(sessionId, load),
    forgetSession: (sessionId) => cache.forget(sessionId),
    // A scan of at most maxEntries, on a rare event (sign-out everywhere, a password, plan or role change).
    forgetOwner: (ownerId) => cache.forgetWhere((session) => session.owner.id === ownerId),
    invalidate: () => cache.invalidate(),
    setLive: (live) => cache.setLive(live),
    get size() {
      return cache.size;
    },
  };
}
