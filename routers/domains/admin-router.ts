import { z } from 'zod';
import { bulkRecheckSchema, redirectFixSchema } from '../../schema/domains.ts';
import { findPublicInterfaceById } from '../visitors/repository.ts';
import { adminProcedure, router } from '../trpc.ts';
import { webhookEvent, withEvents } from '../webhooks/outbox.ts';
import { queueRechecks } from './jobs.ts';
import * as repo from './repository.ts';
import { domainEventData } from './verification.ts';

const tags = ['Admin'];
const noInput = z.object({}).optional();

/**
 * Maintenance over every owner's domains. The three update-* operations queue durable re-checks (a job per domain,
 * deduplicated): each reads TXT, CNAME, A, AAAA and CAA, compares them with the records derived from the current
 * configuration, and applies what follows (a pending domain whose TXT now proves control is verified; a verified
 * or active one whose routing no longer points here gets a warning reason; nothing is deactivated by DNS).
 */
export const domainsAdminRouter = router({
  updateTxt: adminProcedure
    .meta({
      openapi: {
        method: 'POST',
        path: '/api/v1/admin/update-domains-txt',
        tags,
        summary: 'Re-check the ownership TXT record of every domain still pending verification (durable jobs)',
        protect: true,
      },
      successStatus: 202,
    })
    .input(noInput)
    .output(bulkRecheckSchema)
    .mutation(async ({ ctx }) => {
      const ids = await repo.allDomainIds(ctx.deps.database.db, { only: 'pending' });
      return { queued: await queueRechecks(ctx.deps, ids), scope: 'pending' as const };
    }),

  updateCname: adminProcedure
    .meta({
      openapi: {
        method: 'POST',
        path: '/api/v1/admin/update-domains-cname',
        tags,
        summary: 'Re-check the routing records (CNAME, A/AAAA) of every verified domain against the current configuration (durable jobs)',
        description: 'For example after DOMAIN_CNAME_TARGET or DOMAIN_ADDRESSES changed: records now shown are derived from the new values.',
        protect: true,
      },
      successStatus: 202,
    })
    .input(noInput)
    .output(bulkRecheckSchema)
    .mutation(async ({ ctx }) => {
      const ids = await repo.allDomainIds(ctx.deps.database.db, { only: 'verified' });
      return { queued: await queueRechecks(ctx.deps, ids), scope: 'verified' as const };
    }),

  updateBoth: adminProcedure
    .meta({
      openapi: {
        method: 'POST',
        path: '/api/v1/admin/update-domains-both',
        tags,
        summary: 'Re-check every domain, ownership and routing (durable jobs)',
        protect: true,
      },
      successStatus: 202,
    })
    .input(noInput)
    .output(bulkRecheckSchema)
    .mutation(async ({ ctx }) => {
      const ids = await repo.allDomainIds(ctx.deps.database.db, { only: 'all' });
      return { queued: await queueRechecks(ctx.deps, ids), scope: 'all' as const };
    }),

  fixRedirect: adminProcedure
    .meta({
      openapi: {
        method: 'POST',
        path: '/api/v1/admin/fix-domain-redirect',
        tags,
        summary: 'Deactivate active domains that lead nowhere: their chat interface was deleted or is no longer public',
        description: 'Each gets a reason and its owner `domain.deactivated`; activating it again needs a public interface.',
        protect: true,
      },
    })
    .input(noInput)
    .output(redirectFixSchema)
    .mutation(async ({ ctx }) => {
      const db = ctx.deps.database.db;
      const broken: Array<{ row: repo.DomainRow; reason: string }> = [];
      for (const row of await repo.listActiveDomains(db)) {
        if (!row.chat_interface_id) broken.push({ row, reason: 'Its chat interface was deleted' });
        else if (!(await findPublicInterfaceById(db, row.chat_interface_id))) broken.push({ row, reason: 'Its chat interface is not public' });
      }
      const fixed = await withEvents(
        ctx.deps,
        async (trx) => {
          const done: Array<{ row: repo.DomainRow; reason: string }> = [];
          for (const { row, reason } of broken) {
            const current = await repo.findDomainByIdForUpdate(trx, row.id);
            if (current?.status !== 'active') continue;
            done.push({ row: await repo.updateDomain(trx, row.id, { status: 'inactive', status_reason: reason }), reason });
          }
          return done;
        },
        (done) => done.map(({ row }) => webhookEvent(row.owner_id, 'domain.deactivated', domainEventData(row))),
      );
      for (const { row } of fixed) {
        ctx.deps.domainRoutes.forget(row.hostname);
        ctx.deps.domainCertificates.forget(row.hostname);
      }
      return { fixed: fixed.map(({ row, reason }) => ({ id: row.id, hostname: row.hostname, ownerId: row.owner_id, reason })) };
    }),
});
