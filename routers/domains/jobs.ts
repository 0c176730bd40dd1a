import type { AppDeps } from '../context.ts';
import type { JobHandler } from '../jobs/handler.ts';
import { inspectDns } from './dns-check.ts';
import * as repo from './repository.ts';
import { applyDnsReport } from './verification.ts';

export const DOMAIN_RECHECK_JOB = 'domain.recheck';
type RecheckPayload = { domainId: string };

/** A durable re-check of one domain's DNS (sync and the admin bulk operations queue these). */
export function domainJobHandlers(deps: AppDeps): Record<string, JobHandler> {
  return {
    [DOMAIN_RECHECK_JOB]: async (job) => {
      const { domainId } = job.payload as RecheckPayload;
      const row = await repo.findDomainById(deps.database.db, domainId);
      if (!row) return;
      await applyDnsReport(deps, domainId, await inspectDns(deps.dns, row, deps.config));
    },
  };
}

/** Queues a re-check per domain; a domain already queued is not queued twice. */
export async function queueRechecks(deps: Pick<AppDeps, 'jobs'>, domainIds: string[]): Promise<number> {
  for (const domainId of domainIds) {
    await deps.jobs.enqueue(DOMAIN_RECHECK_JOB, { domainId } satisfies RecheckPayload, { dedupeKey: `domain-recheck:${domainId}`, maxAttempts: 3 });
  }
  if (domainIds.length > 0) deps.jobs.notify();
  return domainIds.length;
}
