import { toStorable } from '../../schema/text-input.ts';
import type { AppDeps } from '../context.ts';
import { webhookEvent, withEvents } from '../webhooks/outbox.ts';
import type { DnsReport } from './dns-check.ts';
import * as repo from './repository.ts';

export const domainEventData = (row: repo.DomainRow) => ({ id: row.id, hostname: row.hostname, chatInterfaceId: row.chat_interface_id, status: row.status });

/**
 * Records what DNS showed for a domain and what follows from it, in one transaction: a pending domain whose TXT
 * record proves control becomes verified (and whoever held the hostname goes back to pending); otherwise the
 * reason says what is missing. DNS is asked before this runs, so no lock waits on a resolver. A failure to ask
 * changes no state, and nothing here ever deactivates a working domain.
 */
export async function applyDnsReport(
  deps: Pick<AppDeps, 'database' | 'webhookJobs' | 'domainRoutes' | 'domainCertificates'>,
  domainId: string,
  report: DnsReport,
) {
  const checkedAt = new Date(report.checkedAt);
  const { ownership, routing } = report;
  const result = await withEvents(
    deps,
    async (trx) => {
      const row = await repo.findDomainByIdForUpdate(trx, domainId);
      if (!row) return undefined;
      // DNS answers are anyone's bytes: a NUL (or a lone surrogate) would make the jsonb write fail. The verdicts
      // above were reached on the real values; only the stored copy is cleaned.
      const lastDns = toStorable(report);
      if (row.status === 'pending_verification' && ownership.status === 'ok') {
        // Taken before looking for the current holder, so a claim committed meanwhile is seen and released.
        await repo.lockHostname(trx, row.hostname);
        const released = await repo.releaseClaim(trx, row.hostname, row.id, 'Another account proved control of this hostname');
        const verified = await repo.updateDomain(trx, row.id, {
          status: 'verified',
          status_reason: 'Verified; activate it to serve the chat interface',
          verified_at: checkedAt,
          last_dns: lastDns,
          dns_checked_at: checkedAt,
        });
        return { row: verified, released, verifiedNow: true };
      }
      let reason = row.status_reason;
      if (row.status === 'pending_verification') {
        reason =
          ownership.status === 'error'
            ? `DNS could not be asked (${ownership.reason}); try again`
            : `The TXT record was ${ownership.status === 'missing' ? 'not found' : 'found with another value'}`;
      } else if (routing.status === 'missing' || routing.status === 'mismatch') {
        reason = `The routing record does not point at this service (${routing.status}); visitors may not reach it`;
      } else if (routing.status === 'ok' && row.status_reason?.startsWith('The routing record')) {
        reason = null;
      }
      const updated = await repo.updateDomain(trx, row.id, { last_dns: lastDns, dns_checked_at: checkedAt, status_reason: reason });
      return { row: updated, released: [] as repo.DomainRow[], verifiedNow: false };
    },
    (outcome) =>
      outcome
        ? [
            ...(outcome.verifiedNow ? [webhookEvent(outcome.row.owner_id, 'domain.verified', domainEventData(outcome.row))] : []),
            ...outcome.released.map((other) => webhookEvent(other.owner_id, 'domain.deactivated', domainEventData(other))),
          ]
        : [],
  );
  if (result) {
    deps.domainRoutes.forget(result.row.hostname);
    // A takeover stops the previous holder's certificate being served (the new holder has none until activated).
    if (result.released.length > 0) deps.domainCertificates.forget(result.row.hostname);
  }
  return result;
}
