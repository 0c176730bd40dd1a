import { parse } from 'tldts';
import type { DnsLookup } from '../../adapters/outbound/dns/resolver.ts';
import { createAccountKey, orderCertificate } from '../../adapters/outbound/acme/acme-client.ts';
import type { AppDeps } from '../context.ts';
import { type JobHandler, PermanentJobError } from '../jobs/handler.ts';
import { webhookEvent, withEvents } from '../webhooks/outbox.ts';
import * as certs from './certificate-repository.ts';
import * as repo from './repository.ts';
import { domainEventData } from './verification.ts';
import { toStorable } from '../../schema/text-input.ts';

export const CERTIFICATE_JOB = 'domain.certificate';
type CertificatePayload = { domainId: string };
/** Attempts of one issuance (the queue backs off between them); the reason of each failure is recorded. */
const CERTIFICATE_ATTEMPTS = 6;

/**
 * Whether CAA lets our CA issue for a hostname (RFC 8659): the closest name, climbing from the hostname towards
 * its registrable domain, that has CAA records decides; `issue` records must name one of `identities`. No CAA
 * anywhere allows any CA. A failure to ask is not a refusal: the CA checks CAA itself.
 */
export async function caaVerdict(dns: DnsLookup, hostname: string, identities: readonly string[]): Promise<{ allowed: boolean; reason?: string }> {
  const registrable = parse(hostname, { allowPrivateDomains: true }).domain ?? hostname;
  const labels = hostname.split('.');
  for (let i = 0; i < labels.length; i++) {
    const name = labels.slice(i).join('.');
    const answer = await dns.caa(name);
    if (answer.status === 'found') {
      const issuers = answer.records.filter((r) => r.tag === 'issue').map((r) => r.value.split(';')[0]!.trim().toLowerCase());
      if (issuers.length === 0 || identities.length === 0) return { allowed: true };
      if (issuers.some((issuer) => identities.includes(issuer))) return { allowed: true };
      return { allowed: false, reason: `The CAA record of ${name} allows only ${issuers.map((i) => i || '(no CA)').join(', ')}` };
    }
    if (name === registrable) break;
  }
  return { allowed: true };
}

/** Queues issuance now, or a renewal at `runAt` (its own dedupe key: the issuing job is still running when it queues it). */
export async function queueCertificate(deps: Pick<AppDeps, 'jobs'>, domainId: string, runAt?: Date) {
  await deps.jobs.enqueue(CERTIFICATE_JOB, { domainId } satisfies CertificatePayload, {
    dedupeKey: runAt ? `domain-certificate-renewal:${domainId}:${runAt.getTime()}` : `domain-certificate:${domainId}`,
    maxAttempts: CERTIFICATE_ATTEMPTS,
    ...(runAt ? { runAt } : {}),
  });
  deps.jobs.notify();
}

async function accountKey(deps: AppDeps, directoryUrl: string) {
  const db = deps.database.db;
  const existing = await certs.findAcmeAccount(db, directoryUrl);
  const account = existing ?? (await certs.saveAcmeAccount(db, directoryUrl, deps.secrets.seal(await createAccountKey())));
  return { key: deps.secrets.open(account.key_enc), url: account.account_url };
}

/** Renewal at two thirds of the lifetime (Let's Encrypt's 90 days: after 60). */
export const renewalTime = (notBefore: Date, notAfter: Date) => new Date(notBefore.getTime() + ((notAfter.getTime() - notBefore.getTime()) * 2) / 3);

async function recordFailure(deps: AppDeps, domain: repo.DomainRow, reason: string) {
  const before = await certs.findCertificate(deps.database.db, domain.id);
  await withEvents(
    deps,
    (trx) => certs.saveCertificateState(trx, domain.id, domain.hostname, { status: 'failed', reason }),
    () =>
      before?.status === 'failed' && before.reason === reason
        ? []
        : [webhookEvent(domain.owner_id, 'domain.certificate_failed', { ...domainEventData(domain), reason })],
  );
}

/** Obtains (or renews) the certificate of an active domain. Runs as a durable job; failures are retried with backoff. */
export function certificateJobHandlers(deps: AppDeps): Record<string, JobHandler> {
  return {
    [CERTIFICATE_JOB]: async (job) => {
      const directoryUrl = deps.config.ACME_DIRECTORY_URL;
      const { domainId } = job.payload as CertificatePayload;
      const domain = await repo.findDomainById(deps.database.db, domainId);
      if (!directoryUrl || !domain || domain.status !== 'active') return;
      const db = deps.database.db;
      const current = await certs.findCertificate(db, domainId);
      const caa = await caaVerdict(deps.dns, domain.hostname, deps.config.ACME_CAA_IDENTITIES);
      if (!caa.allowed) {
        await recordFailure(deps, domain, caa.reason!);
        throw new PermanentJobError(caa.reason!);
      }
      await certs.saveCertificateState(db, domainId, domain.hostname, { status: current?.cert_pem ? 'renewing' : 'pending', reason: null });
      try {
        const account = await accountKey(deps, directoryUrl);
        const issued = await orderCertificate({
          directoryUrl,
          accountKey: account.key,
          accountUrl: account.url,
          email: deps.config.ACME_EMAIL,
          hostname: domain.hostname,
          publish: (token, keyAuthorization) => certs.putChallenge(db, token, keyAuthorization).then(() => undefined),
          unpublish: (token) => certs.deleteChallenge(db, token).then(() => undefined),
        });
        if (!account.url) await certs.saveAcmeAccountUrl(db, directoryUrl, issued.accountUrl);
        await certs.saveCertificateState(db, domainId, domain.hostname, {
          status: 'issued',
          reason: null,
          cert_pem: issued.certPem,
          key_enc: deps.secrets.seal(issued.keyPem),
          not_before: issued.notBefore,
          not_after: issued.notAfter,
          issuer: issued.issuer,
        });
        deps.domainCertificates.forget(domain.hostname);
        await queueCertificate(deps, domainId, renewalTime(issued.notBefore, issued.notAfter));
      } catch (error) {
        // The CA's own words, made storable: a refused write would leave the certificate pending with no reason.
        const reason = toStorable(`The CA did not issue: ${error instanceof Error ? error.message.slice(0, 300) : String(error)}`);
        // A renewal that fails keeps serving the certificate it has until it expires.
        if (current?.cert_pem) await certs.saveCertificateState(db, domainId, domain.hostname, { status: 'renewing', reason });
        else await recordFailure(deps, domain, reason);
        throw error;
      }
    },
  };
}
