import { z } from 'zod';
import { AppError } from '../../schema/errors.ts';
import { queryInt } from '../../schema/common.ts';
import { ownerDetailSchema, planSchema, roleSchema, updateOwnerInput } from '../../schema/owners.ts';
import { adminProcedure, router } from '../trpc.ts';
import { listOwners, toOwnerDetail, updateOwnerPlanAndRole } from '../auth/repository.ts';
import { endRunningTrial } from '../billing/repository.ts';
import { kindStats, recentWorkers } from '../jobs/repository.ts';
import { deliveryBacklog } from '../webhooks/repository.ts';
import { rateLimitsProcedure } from './rate-limits.ts';
import { timestamp } from '../../schema/common.ts';
import { createRequire } from 'node:module';

const VERSION = (createRequire(import.meta.url)('../../package.json') as { version: string }).version;
const STARTED_AT = new Date();
/** An instance counts as seen when it worked a job lease this recently. */
const INSTANCE_WINDOW_MINUTES = 10;

const storeHealth = z.object({ ok: z.boolean(), latencyMs: z.number().nullable(), error: z.string().nullable() });
const statusSchema = z.object({
  version: z.string(),
  startedAt: timestamp,
  uptimeSeconds: z.number().int(),
  database: storeHealth.extend({ kind: z.enum(['pglite', 'postgres']) }),
  rateLimitStore: storeHealth.extend({ store: z.enum(['memory', 'redis']) }),
  jobs: z.array(
    z.object({
      kind: z.string(),
      queued: z.number().int(),
      running: z.number().int(),
      dead: z.number().int(),
      oldestReadySeconds: z.number().nullable().meta({ description: 'How long the oldest job that is due has waited' }),
    }),
  ),
  webhooks: z.object({ pendingDeliveries: z.number().int(), oldestPendingSeconds: z.number().nullable() }),
  instances: z
    .array(z.object({ worker: z.string(), lastSeen: timestamp }))
    .meta({ description: `Instances that worked a background job in the last ${INSTANCE_WINDOW_MINUTES} minutes (host:pid:random)` }),
});

const tags = ['Admin'];

export const adminRouter = router({
  status: adminProcedure
    .meta({
      openapi: {
        method: 'GET',
        path: '/api/v1/admin/status',
        tags,
        summary: 'The system: database and rate-limit store health and latency, jobs per kind, webhook backlog, instances, version, uptime',
        protect: true,
      },
    })
    .input(z.object({}).optional())
    .output(statusSchema)
    .query(async ({ ctx }) => {
      const db = ctx.deps.database.db;
      const started = performance.now();
      const database = await ctx.deps.database.ping().then(
        () => ({ kind: ctx.deps.database.kind, ok: true, latencyMs: Math.round((performance.now() - started) * 100) / 100, error: null }),
        (error: unknown) => ({
          kind: ctx.deps.database.kind,
          ok: false,
          latencyMs: null,
          error: error instanceof Error ? error.message.slice(0, 200) : 'failed',
        }),
      );
      const [rateLimitStore, jobs, backlog, workers] = await Promise.all([
        ctx.deps.rateLimiter.health(),
        kindStats(db),
        deliveryBacklog(db),
        recentWorkers(db, INSTANCE_WINDOW_MINUTES),
      ]);
      return {
        version: VERSION,
        startedAt: STARTED_AT.toISOString(),
        uptimeSeconds: Math.round(process.uptime()),
        database,
        rateLimitStore,
        jobs: jobs.map((j) => ({
          kind: j.kind,
          queued: j.queued,
          running: j.running,
          dead: j.dead,
          oldestReadySeconds: j.oldest_ready_seconds === null ? null : Math.round(j.oldest_ready_seconds),
        })),
        webhooks: { pendingDeliveries: backlog.pending, oldestPendingSeconds: backlog.oldest_seconds === null ? null : Math.round(backlog.oldest_seconds) },
        instances: workers.map((w) => ({ worker: w.worker, lastSeen: new Date(w.last_seen).toISOString() })),
      };
    }),

  rateLimits: rateLimitsProcedure,

  listOwners: adminProcedure
    .meta({ openapi: { method: 'GET', path: '/api/v1/admin/owners', tags, summary: 'All owners (newest first, paginated)', protect: true } })
    .input(
      z.object({
        limit: queryInt({ min: 1, max: 200 }).default(50),
        offset: queryInt({ min: 0, max: 1_000_000_000 }).default(0),
        plan: planSchema.optional(),
        role: roleSchema.optional(),
      }),
    )
    .output(z.object({ owners: z.array(ownerDetailSchema), count: z.number().int(), total: z.number().int() }))
    .query(async ({ ctx, input }) => {
      const { rows, total } = await listOwners(ctx.deps.database.db, { plan: input.plan, role: input.role }, { limit: input.limit, offset: input.offset });
      return { owners: rows.map(toOwnerDetail), count: rows.length, total };
    }),

  updateOwner: adminProcedure
    .meta({ openapi: { method: 'PATCH', path: '/api/v1/admin/owners/{id}', tags, summary: "Change an owner's plan or role", protect: true } })
    .input(updateOwnerInput)
    .output(z.object({ owner: ownerDetailSchema }))
    .mutation(async ({ ctx, input }) => {
      const row = await ctx.deps.database.db.transaction().execute(async (trx) => {
        // The admin's plan replaces a running trial's: left running, the trial would still be reported, and its
        // expiry sweep would put the owner on the plan the trial falls back to. Billing row first, then the owner,
        // the order the sweep and the Stripe events lock them in.
        if (input.plan) await endRunningTrial(trx, input.id, new Date());
        return updateOwnerPlanAndRole(trx, input.id, { plan: input.plan, role: input.role });
      });
      if (!row) throw new AppError('NOT_FOUND', 'Owner not found');
      // Every instance hears of it through the change trigger; this one must not wait for the notification.
      ctx.deps.sessionCache.forgetOwner(row.id);
      return { owner: toOwnerDetail(row) };
    }),
});
