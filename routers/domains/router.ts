import { randomBytes, randomUUID } from 'node:crypto';
import { z } from 'zod';
import { deletedSchema, idParam, toIso } from '../../schema/common.ts';
import {
  adminDomainsInput,
  createDomainInput,
  dnsReportSchema,
  domainQueryInput,
  domainSchema,
  publicRouteSchema,
  recheckQueuedSchema,
  reservedCheckSchema,
  sslStatusSchema,
  routingEntrySchema,
  updateDomainInput,
} from '../../schema/domains.ts';
import { AppError } from '../../schema/errors.ts';
import { isUniqueViolation } from '../../db/errors.ts';
import { findOwnedInterface, listOwnedInterfaces } from '../chat-interfaces/repository.ts';
import type { AppDeps, Context } from '../context.ts';
import { adminProcedure, ownerProcedure, publicProcedure, router } from '../trpc.ts';
import { webhookEvent, withEvents } from '../webhooks/outbox.ts';
import { checkOwnership, type DnsReport, expectedRecords, inspectDns } from './dns-check.ts';
import { applyDnsReport, domainEventData as eventData } from './verification.ts';
import { queueRechecks } from './jobs.ts';
import { queueCertificate } from './certificates.ts';
import { sslStatusOf } from './ssl-status.ts';
import { normalizeHostname } from './hostname.ts';
import * as repo from './repository.ts';

const tags = ['Domains'];
/** Domains per owner: every one costs DNS lookups on each sync, so the count is bounded. */
const MAX_DOMAINS_PER_OWNER = 100;
const notFound = () => new AppError('NOT_FOUND', 'Domain not found');
const interfaceNotFound = () => new AppError('NOT_FOUND', 'Chat interface not found', 'chatInterfaceId does not name one of your chat interfaces');

export function toDomain(row: repo.DomainRow, config: AppDeps['config']) {
  return {
    id: row.id,
    hostname: row.hostname,
    chatInterfaceId: row.chat_interface_id,
    status: row.status,
    statusReason: row.status_reason,
    records: expectedRecords(row, config),
    verifiedAt: toIso(row.verified_at),
    activatedAt: toIso(row.activated_at),
    lastDns: (row.last_dns as DnsReport | null) ?? null,
    createdAt: toIso(row.created_at)!,
    updatedAt: toIso(row.updated_at)!,
  };
}

/** The service's own hostnames, and everything under them: no owner may claim those. */
function reservedHostnames(config: AppDeps['config']): string[] {
  const own = [...config.RESERVED_HOSTNAMES, ...config.PUBLIC_ORIGINS.map((o) => new URL(o).hostname), config.DOMAIN_CNAME_TARGET ?? ''];
  return own.map((h) => h.toLowerCase().replace(/\.$/, '')).filter(Boolean);
}
const isReserved = (hostname: string, config: AppDeps['config']) => reservedHostnames(config).some((r) => hostname === r || hostname.endsWith(`.${r}`));

const PROBLEM_TEXT = {
  invalid: 'not a valid DNS hostname',
  ip_address: 'an IP address is not a domain',
  localhost: 'localhost cannot be a custom domain',
  public_suffix: 'a public suffix (such as co.uk or github.io) cannot be claimed; use a domain registered under it',
} as const;

/** A hostname an owner may add, or a 400 naming the field and the reason. */
function acceptableHostname(input: string, config: AppDeps['config']): string {
  const { hostname, problem } = normalizeHostname(input);
  if (problem) throw new AppError('VALIDATION_FAILED', 'Invalid request parameters', `hostname: ${PROBLEM_TEXT[problem]}`);
  if (isReserved(hostname, config)) throw new AppError('VALIDATION_FAILED', 'Invalid request parameters', 'hostname: reserved for the service');
  return hostname;
}

async function ownedDomain(ctx: Context & { owner: { id: string } }, id: string) {
  const row = await repo.findDomain(ctx.deps.database.db, ctx.owner.id, id);
  if (!row) throw notFound();
  return row;
}

const byId = z.object({ id: idParam });
const domainOut = z.object({ domain: domainSchema });

export const domainsRouter = router({
  list: ownerProcedure
    .meta({ openapi: { method: 'GET', path: '/api/v1/domains', tags, summary: 'Your custom domains, newest first', protect: true } })
    .input(z.object({}).optional())
    .output(z.object({ domains: z.array(domainSchema), count: z.number().int() }))
    .query(async ({ ctx }) => {
      const rows = await repo.listDomains(ctx.deps.database.db, ctx.owner.id);
      return { domains: rows.map((r) => toDomain(r, ctx.deps.config)), count: rows.length };
    }),

  create: ownerProcedure
    .meta({
      openapi: {
        method: 'POST',
        path: '/api/v1/domains',
        tags,
        summary: 'Add a custom domain for one of your chat interfaces; the answer lists the DNS records to create',
        description:
          'The hostname is lower-cased and IDNA-converted; IP addresses, localhost, public suffixes and the service’s own hostnames are refused. A hostname another account holds may be added, and is taken over only by proving DNS control (verify).',
        protect: true,
        errorResponses: { NOT_FOUND: 'chatInterfaceId names none of your chat interfaces', CONFLICT: 'You already added this hostname, or have 100 domains' },
      },
      successStatus: 201,
    })
    .input(createDomainInput)
    .output(domainOut)
    .mutation(async ({ ctx, input }) => {
      const db = ctx.deps.database.db;
      const hostname = acceptableHostname(input.hostname, ctx.deps.config);
      if (!(await findOwnedInterface(db, ctx.owner.id, input.chatInterfaceId))) throw interfaceNotFound();
      const claim = await repo.findClaim(db, hostname);
      const reason = claim ? 'Another account holds this hostname; create the TXT record and verify to take it over' : 'Create the TXT record, then verify';
      try {
        const row = await db.transaction().execute(async (trx) => {
          // Count and insert under the owner's lock: concurrent additions would otherwise all pass the count.
          await repo.lockOwnerDomains(trx, ctx.owner.id);
          if ((await repo.countDomains(trx, ctx.owner.id)) >= MAX_DOMAINS_PER_OWNER) {
            throw new AppError('CONFLICT', 'Too many domains', `An account may have at most ${MAX_DOMAINS_PER_OWNER} domains; remove one first`);
          }
          return repo.insertDomain(trx, {
            id: randomUUID(),
            owner_id: ctx.owner.id,
            hostname,
            chat_interface_id: input.chatInterfaceId,
            verification_token: randomBytes(16).toString('hex'),
            status_reason: reason,
          });
        });
        return { domain: toDomain(row, ctx.deps.config) };
      } catch (error) {
        if (isUniqueViolation(error)) throw new AppError('CONFLICT', 'Domain already added', `${hostname} is already one of your domains`);
        throw error;
      }
    }),

  get: ownerProcedure
    .meta({ openapi: { method: 'GET', path: '/api/v1/domains/{id}', tags, summary: 'One domain', protect: true } })
    .input(byId)
    .output(domainOut)
    .query(async ({ ctx, input }) => ({ domain: toDomain(await ownedDomain(ctx, input.id), ctx.deps.config) })),

  update: ownerProcedure
    .meta({ openapi: { method: 'PATCH', path: '/api/v1/domains/{id}', tags, summary: 'Point the domain at another of your chat interfaces', protect: true } })
    .input(updateDomainInput)
    .output(domainOut)
    .mutation(async ({ ctx, input }) => {
      const row = await ownedDomain(ctx, input.id);
      if (!(await findOwnedInterface(ctx.deps.database.db, ctx.owner.id, input.chatInterfaceId))) throw interfaceNotFound();
      const updated = await repo.updateDomain(ctx.deps.database.db, row.id, { chat_interface_id: input.chatInterfaceId });
      ctx.deps.domainRoutes.forget(row.hostname);
      return { domain: toDomain(updated, ctx.deps.config) };
    }),

  delete: ownerProcedure
    .meta({ openapi: { method: 'DELETE', path: '/api/v1/domains/{id}', tags, summary: 'Remove a domain (it stops serving at once)', protect: true } })
    .input(byId)
    .output(deletedSchema)
    .mutation(async ({ ctx, input }) => {
      const row = await repo.deleteDomain(ctx.deps.database.db, ctx.owner.id, input.id);
      if (!row) throw notFound();
      ctx.deps.domainRoutes.forget(row.hostname);
      ctx.deps.domainCertificates.forget(row.hostname);
      return { deleted: true as const, id: row.id };
    }),

  verify: ownerProcedure
    .meta({
      openapi: {
        method: 'POST',
        path: '/api/v1/domains/{id}/verify',
        tags,
        summary: 'Check the ownership TXT record; when it is there the domain is verified (idempotent)',
        description:
          'Answers 200 either way: `verified` says whether the record was found, `ownership` what DNS showed. Verifying a hostname another account holds moves theirs back to pending. Emits `domain.verified`.',
        protect: true,
      },
    })
    .input(byId)
    .output(z.object({ domain: domainSchema, verified: z.boolean(), ownership: dnsReportSchema.shape.ownership }))
    .mutation(async ({ ctx, input }) => {
      const before = await ownedDomain(ctx, input.id);
      // Only the TXT record: what DNS showed for the rest at the last full check is kept as it was.
      const ownership = await checkOwnership(ctx.deps.dns, before);
      const previous = (before.last_dns as DnsReport | null) ?? null;
      const report: DnsReport = {
        cname: [],
        a: [],
        aaaa: [],
        caa: [],
        routing: { status: 'not_required', found: [], reason: null },
        ...previous,
        checkedAt: new Date().toISOString(),
        ownership,
      };
      const result = await applyDnsReport(ctx.deps, before.id, report);
      if (!result) throw notFound();
      return { domain: toDomain(result.row, ctx.deps.config), verified: result.row.status !== 'pending_verification', ownership };
    }),

  checkDns: ownerProcedure
    .meta({
      openapi: {
        method: 'GET',
        path: '/api/v1/domains/{id}/check-dns',
        tags,
        summary: 'What DNS shows now for the domain (TXT, CNAME, A, AAAA, CAA) against what is expected; changes nothing',
        protect: true,
      },
    })
    .input(byId)
    .output(z.object({ hostname: z.string(), dns: dnsReportSchema }))
    .query(async ({ ctx, input }) => {
      const row = await ownedDomain(ctx, input.id);
      return { hostname: row.hostname, dns: await inspectDns(ctx.deps.dns, row, ctx.deps.config) };
    }),

  verificationRecords: ownerProcedure
    .meta({
      openapi: { method: 'GET', path: '/api/v1/domains/{id}/verification-records', tags, summary: 'The DNS records to create for this domain', protect: true },
    })
    .input(byId)
    .output(z.object({ hostname: z.string(), records: domainSchema.shape.records }))
    .query(async ({ ctx, input }) => {
      const row = await ownedDomain(ctx, input.id);
      return { hostname: row.hostname, records: expectedRecords(row, ctx.deps.config) };
    }),

  activate: ownerProcedure
    .meta({
      openapi: {
        method: 'POST',
        path: '/api/v1/domains/{id}/activate',
        tags,
        summary: 'Serve the chat interface at this verified domain',
        description: 'Emits `domain.activated`.',
        protect: true,
        errorResponses: { CONFLICT: 'The domain is not verified, or its chat interface is not public' },
      },
    })
    .input(byId)
    .output(domainOut)
    .mutation(async ({ ctx, input }) => {
      const row = await withEvents(
        ctx.deps,
        async (trx) => {
          const current = await repo.findDomainForUpdate(trx, ctx.owner.id, input.id);
          if (!current) throw notFound();
          if (current.status === 'active') return { row: current, changed: false };
          if (current.status === 'pending_verification') throw new AppError('CONFLICT', 'Domain not verified', 'Verify the domain first (POST .../verify)');
          const iface = current.chat_interface_id ? await findOwnedInterface(trx, ctx.owner.id, current.chat_interface_id) : undefined;
          if (!iface?.public)
            throw new AppError('CONFLICT', 'Chat interface not public', 'Make the chat interface public (public: true) to serve it at a domain');
          return { row: await repo.updateDomain(trx, current.id, { status: 'active', status_reason: null, activated_at: new Date() }), changed: true };
        },
        ({ row, changed }) => (changed ? [webhookEvent(row.owner_id, 'domain.activated', eventData(row))] : []),
      );
      ctx.deps.domainRoutes.forget(row.row.hostname);
      ctx.deps.domainCertificates.forget(row.row.hostname);
      if (row.changed && ctx.deps.config.TLS_MODE === 'acme') await queueCertificate(ctx.deps, row.row.id);
      return { domain: toDomain(row.row, ctx.deps.config) };
    }),

  deactivate: ownerProcedure
    .meta({
      openapi: {
        method: 'POST',
        path: '/api/v1/domains/{id}/deactivate',
        tags,
        summary: 'Stop serving at this domain (it stays verified; activate it again at any time)',
        description: 'Emits `domain.deactivated`.',
        protect: true,
        errorResponses: { CONFLICT: 'The domain was never activated (it is pending verification or only verified)' },
      },
    })
    .input(byId)
    .output(domainOut)
    .mutation(async ({ ctx, input }) => {
      const result = await withEvents(
        ctx.deps,
        async (trx) => {
          const current = await repo.findDomainForUpdate(trx, ctx.owner.id, input.id);
          if (!current) throw notFound();
          if (current.status === 'inactive') return { row: current, changed: false };
          if (current.status !== 'active') throw new AppError('CONFLICT', 'Domain not active', 'Only an active domain can be deactivated');
          return { row: await repo.updateDomain(trx, current.id, { status: 'inactive', status_reason: 'Deactivated by the owner' }), changed: true };
        },
        ({ row, changed }) => (changed ? [webhookEvent(row.owner_id, 'domain.deactivated', eventData(row))] : []),
      );
      ctx.deps.domainRoutes.forget(result.row.hostname);
      ctx.deps.domainCertificates.forget(result.row.hostname);
      return { domain: toDomain(result.row, ctx.deps.config) };
    }),

  checkReserved: publicProcedure
    .meta({
      openapi: {
        method: 'GET',
        path: '/api/v1/domains/check-reserved',
        tags,
        summary: 'Whether a hostname could be added: reserved for the service, not a claimable name, already held, or available',
      },
    })
    .input(domainQueryInput)
    .output(reservedCheckSchema)
    .query(async ({ ctx, input }) => {
      const { hostname, problem } = normalizeHostname(input.domain);
      if (problem) return { domain: hostname, available: false, reason: problem };
      if (isReserved(hostname, ctx.deps.config)) return { domain: hostname, available: false, reason: 'reserved' as const };
      const claim = await repo.findClaim(ctx.deps.database.db, hostname);
      return claim ? { domain: hostname, available: false, reason: 'claimed' as const } : { domain: hostname, available: true, reason: null };
    }),

  routePublic: publicProcedure
    .meta({
      openapi: {
        method: 'GET',
        path: '/api/v1/domains/route-public',
        tags,
        summary: 'The public facts of an active domain (404 otherwise); usable as the `ask` endpoint of on-demand TLS',
        description: 'Answers from a per-instance cache (a few seconds), so edge proxies may call it on every handshake.',
        errorResponses: { NOT_FOUND: 'No active domain with this hostname' },
      },
    })
    .input(domainQueryInput)
    .output(publicRouteSchema)
    .query(async ({ ctx, input }) => {
      const { hostname, problem } = normalizeHostname(input.domain);
      const route = problem ? null : await ctx.deps.domainRoutes.lookup(ctx.deps.database.db, hostname);
      if (!route) throw new AppError('NOT_FOUND', 'Domain not found', 'No active domain with this hostname');
      return { domain: hostname, chatInterface: { slug: route.chatInterface.slug, name: route.chatInterface.name }, pageUrl: `https://${hostname}/` };
    }),

  sslStatus: ownerProcedure
    .meta({
      openapi: {
        method: 'GET',
        path: '/api/v1/domains/{id}/ssl-status',
        tags,
        summary: 'The certificate of the domain: none, pending, issued (with its dates), renewing, or failed with the reason',
        description:
          'Mode acme (TLS_MODE): certificates are obtained over ACME once the domain is active and renewed at two thirds of their lifetime. Mode proxy: the certificate the proxy serves at the active domain, read now with a TLS handshake (at most 5 s).',
        protect: true,
      },
    })
    .input(byId)
    .output(z.object({ ssl: sslStatusSchema }))
    .query(async ({ ctx, input }) => {
      const row = await ownedDomain(ctx, input.id);
      return { ssl: await sslStatusOf(ctx.deps, row) };
    }),

  sync: ownerProcedure
    .meta({
      openapi: {
        method: 'POST',
        path: '/api/v1/domains/sync',
        tags,
        summary: 'Re-check all your domains in the background (durable jobs); results land in each domain’s lastDns and status',
        description: 'A pending domain whose TXT record is now there becomes verified (`domain.verified`). DNS never deactivates a domain.',
        protect: true,
      },
      successStatus: 202,
    })
    .input(z.object({}).optional())
    .output(recheckQueuedSchema)
    .mutation(async ({ ctx }) => {
      const rows = await repo.listDomains(ctx.deps.database.db, ctx.owner.id);
      const queued = await queueRechecks(
        ctx.deps,
        rows.map((r) => r.id),
      );
      return { queued, domains: rows.map((r) => ({ id: r.id, hostname: r.hostname, status: r.status, dnsCheckedAt: toIso(r.dns_checked_at) })) };
    }),

  routing: ownerProcedure
    .meta({ openapi: { method: 'GET', path: '/api/v1/domains-routing', tags, summary: 'Your hostname -> chat interface table', protect: true } })
    .input(z.object({}).optional())
    .output(z.object({ routes: z.array(routingEntrySchema) }))
    .query(async ({ ctx }) => {
      const db = ctx.deps.database.db;
      const [rows, interfaces] = await Promise.all([repo.listDomains(db, ctx.owner.id), listOwnedInterfaces(db, ctx.owner.id)]);
      const byInterface = new Map(interfaces.map((i) => [i.id, i]));
      return {
        routes: rows.map((row) => {
          const iface = row.chat_interface_id ? byInterface.get(row.chat_interface_id) : undefined;
          return {
            hostname: row.hostname,
            status: row.status,
            chatInterfaceId: row.chat_interface_id,
            chatInterfaceSlug: iface?.slug ?? null,
            serving: row.status === 'active' && iface?.public === true,
          };
        }),
      };
    }),

  adminList: adminProcedure
    .meta({
      openapi: { method: 'GET', path: '/api/v1/admin/domains', tags: ['Admin'], summary: 'All domains (newest first, paginated, by status)', protect: true },
    })
    .input(adminDomainsInput)
    .output(z.object({ domains: z.array(domainSchema.extend({ ownerId: z.string() })), total: z.number().int() }))
    .query(async ({ ctx, input }) => {
      const { rows, total } = await repo.listAllDomains(ctx.deps.database.db, { status: input.status }, { limit: input.limit, offset: input.offset });
      return { domains: rows.map((r) => ({ ...toDomain(r, ctx.deps.config), ownerId: r.owner_id })), total };
    }),
});
