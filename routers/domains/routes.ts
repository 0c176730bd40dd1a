import type { Kysely } from 'kysely';
import type { DB } from '../../db/types.ts';
import { findPublicInterfaceById } from '../visitors/repository.ts';
import * as repo from './repository.ts';

export interface DomainRoute {
  hostname: string;
  chatInterface: { id: string; slug: string; name: string; allowedOrigins: string[] };
}

/**
 * Active domain -> public interface, kept per instance for a few seconds: edge proxies ask route-public before
 * every certificate and the listener asks on every request to a custom host. Changes made through this instance
 * drop their entries at once (a domain's by hostname, a chat interface's by its id); other instances see them
 * within the TTL. Misses are cached too (a scanner trying random hostnames costs one query per hostname per TTL).
 */
export function createDomainRouteCache(options: { ttlMs: number; maxEntries: number }) {
  // chatInterfaceId is the interface the domain leads to, kept for misses too (an active domain of a private
  // interface), so that making the interface public finds the entry to drop.
  const entries = new Map<string, { route: DomainRoute | null; chatInterfaceId: string | null; expires: number }>();
  // Counts forgets: a lookup that started before one does not store its answer, which may predate the change.
  let forgets = 0;
  return {
    async lookup(db: Kysely<DB>, hostname: string): Promise<DomainRoute | null> {
      const now = Date.now();
      const hit = entries.get(hostname);
      if (hit && hit.expires > now) return hit.route;
      const forgetsAtStart = forgets;
      const { route, chatInterfaceId } = await findActiveRoute(db, hostname);
      if (forgets !== forgetsAtStart) return route;
      if (entries.size >= options.maxEntries) entries.delete(entries.keys().next().value as string);
      entries.set(hostname, { route, chatInterfaceId, expires: now + options.ttlMs });
      return route;
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

async function findActiveRoute(db: Kysely<DB>, hostname: string): Promise<{ route: DomainRoute | null; chatInterfaceId: string | null }> {
  const claim = await repo.findClaim(db, hostname);
  const chatInterfaceId = claim?.chat_interface_id ?? null;
  if (claim?.status !== 'active' || !chatInterfaceId) return { route: null, chatInterfaceId };
  const iface = await findPublicInterfaceById(db, chatInterfaceId);
  const route = iface ? { hostname, chatInterface: { id: iface.id, slug: iface.slug, name: iface.name, allowedOrigins: iface.allowed_origins } } : null;
  return { route, chatInterfaceId };
}

/**
 * A Host the listener does not know as its own: an active domain's route, a domain held past verification that is
 * not serving, a hostname only added (every record still pending verification), or nothing.
 */
export async function describeHost(deps: { database: { db: Kysely<DB> }; domainRoutes: DomainRouteCache }, hostname: string) {
  const db = deps.database.db;
  const route = await deps.domainRoutes.lookup(db, hostname);
  if (route) return { kind: 'serving' as const, route };
  if (await repo.findClaim(db, hostname)) return { kind: 'not_serving' as const };
  return (await repo.isHostnameAdded(db, hostname)) ? { kind: 'pending' as const } : { kind: 'unknown' as const };
}
