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
 * drop their entry at once; other instances see them within the TTL. Misses are cached too (a scanner trying
 * random hostnames costs one query per hostname per TTL).
 */
export function createDomainRouteCache(options: { ttlMs: number; maxEntries: number }) {
  const entries = new Map<string, { route: DomainRoute | null; expires: number }>();
  return {
    async lookup(db: Kysely<DB>, hostname: string): Promise<DomainRoute | null> {
      const now = Date.now();
      const hit = entries.get(hostname);
      if (hit && hit.expires > now) return hit.route;
      const route = await findActiveRoute(db, hostname);
      if (entries.size >= options.maxEntries) entries.delete(entries.keys().next().value as string);
      entries.set(hostname, { route, expires: now + options.ttlMs });
      return route;
    },
    forget(hostname: string) {
      entries.delete(hostname);
    },
  };
}

export type DomainRouteCache = ReturnType<typeof createDomainRouteCache>;

async function findActiveRoute(db: Kysely<DB>, hostname: string): Promise<DomainRoute | null> {
  const claim = await repo.findClaim(db, hostname);
  if (!claim || claim.status !== 'active' || !claim.chat_interface_id) return null;
  const iface = await findPublicInterfaceById(db, claim.chat_interface_id);
  return iface ? { hostname, chatInterface: { id: iface.id, slug: iface.slug, name: iface.name, allowedOrigins: iface.allowed_origins } } : null;
}

/** A Host the listener does not know as its own: an active domain's route, a known domain that is not serving, or nothing. */
export async function describeHost(deps: { database: { db: Kysely<DB> }; domainRoutes: DomainRouteCache }, hostname: string) {
  const route = await deps.domainRoutes.lookup(deps.database.db, hostname);
  if (route) return { kind: 'serving' as const, route };
  const claim = await repo.findClaim(deps.database.db, hostname);
  return claim ? { kind: 'not_serving' as const } : { kind: 'unknown' as const };
}
