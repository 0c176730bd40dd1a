import { createSecureContext, type SecureContext } from 'node:tls';
import type { Kysely } from 'kysely';
import type { SecretBox } from '../../adapters/outbound/secrets.ts';
import type { DB } from '../../db/types.ts';
import { findServableCertificate } from './certificate-repository.ts';

/**
 * The TLS contexts of custom domains for the listener's SNI callback, loaded from the database on first use and
 * kept per instance for a minute: a change made here (issued, renewed, deactivated, deleted, taken over) shows at
 * once, one made through another instance within that minute. A hostname without a servable certificate gets the
 * default certificate.
 */
export function createCertificateStore(options: { db: Kysely<DB>; secrets: SecretBox; ttlMs: number; maxEntries: number }) {
  const entries = new Map<string, { context: SecureContext | null; expires: number }>();
  // Counts forgets: a load that started before one does not store its answer, which may predate the change.
  let forgets = 0;
  return {
    async contextFor(hostname: string): Promise<SecureContext | undefined> {
      const now = Date.now();
      const hit = entries.get(hostname);
      if (hit && hit.expires > now) return hit.context ?? undefined;
      const forgetsAtStart = forgets;
      const row = await findServableCertificate(options.db, hostname);
      const usable = row?.cert_pem && row.key_enc && (!row.not_after || row.not_after.getTime() > now);
      const context = usable ? createSecureContext({ cert: row.cert_pem!, key: options.secrets.open(row.key_enc!) }) : null;
      if (forgets !== forgetsAtStart) return context ?? undefined;
      if (entries.size >= options.maxEntries) entries.delete(entries.keys().next().value as string);
      entries.set(hostname, { context, expires: now + options.ttlMs });
      return context ?? undefined;
    },
    forget(hostname: string) {
      forgets++;
      entries.delete(hostname);
    },
  };
}

export type CertificateStore = ReturnType<typeof createCertificateStore>;
