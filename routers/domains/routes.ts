import type { Kysely } from 'kysely';
import type { DB } from '../../db/types.ts';
import { findPublicInterfaceById } from '../visitors/repository.ts';
import * as repo from './repository.ts';

export interface DomainRoute {
  hostname: string;
  chatInterface: { id: string; slug: string; name: string; allowedOrigins: string[] };
}

/**
 * What a hostname is (an active domain's route to its public interface, a domain held but not serving, a name only
 * added, or nothing), kept per instance for a few seconds: edge proxies ask route-public before every certificate,
 * and every visitor page and asset asks for its Host. Changes made through this instance drop their entries at once
 * (a domain's by hostname, a chat interface's by its id); other instances see them within the TTL. Misses are
 * cached too (a scanner trying random hostnames costs a query or two per hostname per TTL).
 */
export function createDomainRouteCache(options: { ttlMs: number; maxEntries: number }) {
  // chatInterfaceId is the interface the domain leads to, kept for misses too (an active domain of a private
  // interface), so that making the interface public finds the entry to drop.
  const entries = new Map<string, { state: HostState; chatInterfaceId: string | null; expires: number }>();
  // Counts forgets: a lookup that started before one does not store its answer, which may predate the change.
  let forgets = 0;
  async function describe(db: Kysely<DB>, hostname: string): Promise<HostState> {
    const now = Date.now();
    const hit = entries.get(hostname);
    if (hit && hit.expires > now) return hit.state;
    const forgetsAtStart = forgets;
    const { state, chatInterfaceId } = await findHostState(db, hostname);
    if (forgets !== forgetsAtStart) return state;
    if (entries.size >= options.maxEntries) entries.delete(entries.keys().next().value as string);
    entries.set(hostname, { state, chatInterfaceId, expires: now + options.ttlMs });
    return state;
  }
  return {
    describe,
    async lookup(db: Kysely<DB>, hostname: string): Promise<DomainRoute | null> {
      const state = await describe(db, hostname);
      return state.kind === 'serving' ? state.route : null;
    },
    forget(hostname: string) {
      forgets++;
      entries.delete(hostname);
    },
    /** After a chat interface changed or was deleted (public flag, slug, name, origins): drops the hostnames that lead to it. */
    forgetInterface(chatInterfaceId: string) {
      forgets++;
      for (const [hostname, entry] of entries) if (entry.chatInterfaceId === chatInterfaceId) entries.delete(hostname);
    },
  };
}

export type DomainRouteCache = ReturnType<typeof createDomainRouteCache>;

/**
 * A Host the listener does not know as its own: an active domain's route, a domain held past verification that is
 * not serving (not active, or its interface not public), a hostname only added (every record still pending
 * verification), or nothing.
 */
export type HostState = { kind: 'serving'; route: DomainRoute } | { kind: 'not_serving' } | { kind: 'pending' } | { kind: 'unknown' };

async function findHostState(db: Kysely<DB>, hostname: string): Promise<{ state: HostState; chatInterfaceId: string | null }> {
  const claim = await repo.findClaim(db, hostname);
  if (!claim) return { state: { kind: (await repo.isHostnameAdded(db, hostname)) ? 'pending' : 'unknown' }, chatInterfaceId: null };
  const chatInterfaceId = claim.chat_interface_id ?? null;
  if (claim.status !== 'active' || !chatInterfaceId) return { state: { kind: 'not_serving' }, chatInterfaceId };
  const iface = await findPublicInterfaceById(db, chatInterfaceId);
  if (!iface) return { state: { kind: 'not_serving' }, chatInterfaceId };
  const route = { hostname, chatInterface: { id: iface.id, slug: iface.slug, name: iface.name, allowedOrigins: iface.allowed_origins } };
  return { state: { kind: 'serving', route }, chatInterfaceId };
}
