import type { z } from 'zod';
import type { sslStatusSchema } from '../../schema/domains.ts';
import type { AppDeps } from '../context.ts';
import { renewalTime } from './certificates.ts';
import { findCertificate } from './certificate-repository.ts';
import type { DomainRow } from './repository.ts';
import { type CertificateFacts, inspectServedCertificate, NO_CERTIFICATE, pemFacts } from './served-certificate.ts';

type SslStatus = z.infer<typeof sslStatusSchema>;

const iso = (date: Date | null) => (date ? date.toISOString() : null);
const reported = (facts: CertificateFacts) => ({
  issuer: facts.issuer,
  notBefore: iso(facts.notBefore),
  notAfter: iso(facts.notAfter),
  serialNumber: facts.serialNumber,
  fingerprintSha256: facts.fingerprintSha256,
});

/**
 * The certificate state of a domain in the configured TLS mode. In proxy mode only an active domain is looked at:
 * its owner has proven control of its DNS, so ssl-status cannot be used to make the service handshake with any
 * hostname someone types in.
 */
export async function sslStatusOf(deps: Pick<AppDeps, 'http' | 'dns' | 'config' | 'database'>, domain: DomainRow): Promise<SslStatus> {
  const base = { hostname: domain.hostname, mode: deps.config.TLS_MODE, renewsAt: null, checkedAt: null };
  if (deps.config.TLS_MODE === 'off') return { ...base, status: 'none', reason: null, ...reported(NO_CERTIFICATE) };
  if (deps.config.TLS_MODE === 'proxy') {
    if (domain.status !== 'active') {
      return { ...base, status: 'none', reason: 'The proxy obtains a certificate once the domain is active', ...reported(NO_CERTIFICATE) };
    }
    const checkedAt = new Date().toISOString();
    const served = await inspectServedCertificate(deps, domain.hostname);
    return { ...base, checkedAt, status: served.status, reason: served.reason, ...reported(served) };
  }
  const cert = await findCertificate(deps.database.db, domain.id);
  const facts = cert?.cert_pem ? pemFacts(cert.cert_pem) : NO_CERTIFICATE;
  return {
    ...base,
    status: cert?.status ?? 'none',
    reason: cert?.reason ?? null,
    ...reported(facts),
    renewsAt: cert?.not_before && cert.not_after ? renewalTime(cert.not_before, cert.not_after).toISOString() : null,
  };
}
