import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { AppError } from '../../schema/errors.ts';
import { deletedSchema, idParam, saveWarningsSchema, toIso } from '../../schema/common.ts';
import { decodeCursor, encodeCursor } from '../pagination.ts';
import {
  createdWebhookSchema,
  createWebhookInput,
  listDeliveriesInput,
  updateWebhookInput,
  webhookDeliverySchema,
  webhookSchema,
  webhookStatsSchema,
} from '../../schema/webhooks.ts';
import { enterpriseProcedure, router } from '../trpc.ts';
import type { AppDeps } from '../context.ts';
import type { WebhookRow } from '../../db/types.ts';
import { assertValidSecret, generateSecret } from './signing.ts';
import { checkReceiverUrlAtSave, receiverUrlProblem } from './url-policy.ts';
import { recordEvents, webhookEvent } from './outbox.ts';
import { REPLAY_JOB } from './delivery.ts';
import { webhookFairKey } from './outbox-repository.ts';
import { withWarnings } from '../address-at-save.ts';
import * as repo from './repository.ts';

const tags = ['Enterprise webhooks'];
const ROTATION_GRACE_MS = 24 * 3_600_000;
const VALIDATE_TIMEOUT_MS = 10_000;

const webhookNotFound = () => new AppError('NOT_FOUND', 'Webhook not found');
const webhookWithStats = webhookSchema.extend({ stats: webhookStatsSchema });

async function ownedWebhook(deps: Pick<AppDeps, 'database'>, ownerId: string, id: string) {
  const row = await repo.findWebhook(deps.database.db, ownerId, id);
  if (!row) throw webhookNotFound();
  return row;
}

async function withStats(deps: Pick<AppDeps, 'database'>, ownerId: string, rows: WebhookRow[]) {
  const stats = await repo.deliveryStats(
    deps.database.db,
    ownerId,
    rows.map((r) => r.id),
  );
  const now = new Date();
  return rows.map((row) => {
    const s = stats.get(row.id);
    const decided = (s?.succeeded ?? 0) + (s?.failed ?? 0);
    return {
      ...repo.toWebhook(row, now),
      stats: {
        deliveries: s?.deliveries ?? 0,
        succeeded: s?.succeeded ?? 0,
        failed: s?.failed ?? 0,
        pending: s?.pending ?? 0,
        successRate: decided === 0 ? null : Math.round(((s?.succeeded ?? 0) / decided) * 10_000) / 10_000,
        lastFailureAt: toIso(s?.last_failure_at ?? null),
        lastFailureStatus: s?.last_failure_status ?? null,
        lastSuccessAt: toIso(row.last_success_at),
      },
    };
  });
}

const wake = (deps: Pick<AppDeps, 'webhookJobs'>, queued: number) => {
  if (queued > 0) deps.webhookJobs.notify();
};

export const webhooksRouter = router({
  list: enterpriseProcedure
    .meta({
      openapi: {
        method: 'GET',
        path: '/api/v1/enterprise/webhooks',
        tags,
        summary: 'List your webhook endpoints with their delivery statistics',
        protect: true,
      },
    })
    .input(z.object({}).optional())
    .output(z.object({ webhooks: z.array(webhookWithStats), count: z.number().int() }))
    .query(async ({ ctx }) => {
      const rows = await repo.listWebhooks(ctx.deps.database.db, ctx.owner.id);
      return { webhooks: await withStats(ctx.deps, ctx.owner.id, rows), count: rows.length };
    }),

  create: enterpriseProcedure
    .meta({
      openapi: {
        method: 'POST',
        path: '/api/v1/enterprise/webhooks',
        tags,
        summary: 'Register a webhook endpoint (a generated secret is shown once)',
        protect: true,
      },
      successStatus: 201,
    })
    .input(createWebhookInput)
    .output(createdWebhookSchema)
    .mutation(async ({ ctx, input }) => {
      const warning = await checkReceiverUrlAtSave(ctx.deps, input.url);
      if (input.secret !== undefined) assertValidSecret(input.secret);
      const secret = input.secret ?? generateSecret();
      const row = await repo.insertWebhook(ctx.deps.database.db, {
        id: randomUUID(),
        owner_id: ctx.owner.id,
        url: input.url,
        description: input.description ?? null,
        events: [...new Set(input.events ?? ['*'])],
        enabled: input.enabled ?? true,
        secret_enc: ctx.deps.secrets.seal(secret),
      });
      return withWarnings({ webhook: repo.toWebhook(row, new Date()), ...(input.secret === undefined ? { secret } : {}) }, [warning]);
    }),

  get: enterpriseProcedure
    .meta({
      openapi: {
        method: 'GET',
        path: '/api/v1/enterprise/webhooks/{webhookId}',
        tags,
        summary: 'One webhook endpoint with its delivery statistics',
        protect: true,
      },
    })
    .input(z.object({ webhookId: idParam }))
    .output(z.object({ webhook: webhookWithStats }))
    .query(async ({ ctx, input }) => {
      const row = await ownedWebhook(ctx.deps, ctx.owner.id, input.webhookId);
      return { webhook: (await withStats(ctx.deps, ctx.owner.id, [row]))[0]! };
    }),

  update: enterpriseProcedure
    .meta({
      openapi: {
        method: 'PATCH',
        path: '/api/v1/enterprise/webhooks/{webhookId}',
        tags,
        summary: 'Change the URL, events, description, or enable/disable',
        protect: true,
      },
    })
    .input(updateWebhookInput)
    .output(z.object({ webhook: webhookSchema, warnings: saveWarningsSchema }))
    .mutation(async ({ ctx, input }) => {
      const current = await ownedWebhook(ctx.deps, ctx.owner.id, input.webhookId);
      const warning = input.url === undefined ? undefined : await checkReceiverUrlAtSave(ctx.deps, input.url);
      const now = new Date();
      const changes: Parameters<typeof repo.updateWebhook>[3] = {};
      if (input.url !== undefined) changes.url = input.url;
      if (input.events !== undefined) changes.events = [...new Set(input.events)];
      if (input.description !== undefined) changes.description = input.description;
      if (input.enabled === true && !current.enabled) Object.assign(changes, { enabled: true, disabled_reason: null, disabled_at: null, failing_since: null });
      if (input.enabled === false && current.enabled) Object.assign(changes, { enabled: false, disabled_reason: 'owner', disabled_at: now });
      const row = await repo.updateWebhook(ctx.deps.database.db, ctx.owner.id, current.id, changes);
      if (!row) throw webhookNotFound();
      return withWarnings({ webhook: repo.toWebhook(row, now) }, [warning]);
    }),

  delete: enterpriseProcedure
    .meta({
      openapi: {
        method: 'DELETE',
        path: '/api/v1/enterprise/webhooks/{webhookId}',
        tags,
        summary: 'Delete a webhook endpoint and its delivery history',
        protect: true,
      },
    })
    .input(z.object({ webhookId: idParam }))
    .output(deletedSchema)
    .mutation(async ({ ctx, input }) => {
      if (!(await repo.deleteWebhook(ctx.deps.database.db, ctx.owner.id, input.webhookId))) throw webhookNotFound();
      return { deleted: true as const, id: input.webhookId };
    }),

  deliveries: enterpriseProcedure
    .meta({
      openapi: {
        method: 'GET',
        path: '/api/v1/enterprise/webhooks/{webhookId}/deliveries',
        tags,
        summary: 'Delivery history, newest first, paginated (limit, cursor, status)',
        protect: true,
      },
    })
    .input(listDeliveriesInput)
    .output(z.object({ deliveries: z.array(webhookDeliverySchema), nextCursor: z.string().nullable(), hasMore: z.boolean() }))
    .query(async ({ ctx, input }) => {
      const hook = await ownedWebhook(ctx.deps, ctx.owner.id, input.webhookId);
      const after = input.cursor ? decodeCursor(input.cursor) : undefined;
      const rows = await repo.listDeliveries(ctx.deps.database.db, hook.id, { limit: input.limit, after, status: input.status });
      const page = rows.slice(0, input.limit).map(repo.toDelivery);
      const hasMore = rows.length > input.limit;
      const last = page[page.length - 1];
      return { deliveries: page, nextCursor: hasMore && last ? encodeCursor(last.createdAt, last.deliveryId) : null, hasMore };
    }),

  replay: enterpriseProcedure
    .meta({
      openapi: {
        method: 'POST',
        path: '/api/v1/enterprise/webhooks/{webhookId}/replay',
        tags,
        summary: 'Re-send a failed delivery now, with the same event id (webhook-id)',
        protect: true,
        errorResponses: { CONFLICT: 'The delivery succeeded already or was never attempted, or the endpoint is disabled (re-enable it first)' },
      },
    })
    .input(z.object({ webhookId: idParam, deliveryId: idParam }))
    .output(z.object({ deliveryId: z.string(), eventId: z.string(), replayQueued: z.literal(true), message: z.string() }))
    .mutation(async ({ ctx, input }) => {
      const hook = await ownedWebhook(ctx.deps, ctx.owner.id, input.webhookId);
      const delivery = await repo.findDelivery(ctx.deps.database.db, hook.id, input.deliveryId);
      if (!delivery) throw new AppError('NOT_FOUND', 'Delivery not found', 'deliveryId does not name a delivery of this webhook');
      if (delivery.status === 'succeeded') throw new AppError('CONFLICT', 'Delivery already succeeded', 'Only failed or exhausted deliveries are replayed');
      if (delivery.status === 'pending') throw new AppError('CONFLICT', 'Delivery not attempted yet', 'Only failed or exhausted deliveries are replayed');
      // A disabled endpoint receives nothing but the test event (which the test operation sends, not replay).
      if (!hook.enabled && delivery.event_type !== 'webhook.test') {
        throw new AppError('CONFLICT', 'Endpoint disabled', 'Re-enable it first: PATCH {"enabled":true}');
      }
      await ctx.deps.webhookJobs.enqueue(
        REPLAY_JOB,
        { deliveryId: delivery.id },
        {
          dedupeKey: `webhook-replay:${delivery.id}`,
          maxAttempts: 3,
          fairKey: webhookFairKey(ctx.owner.id),
        },
      );
      ctx.deps.webhookJobs.notify();
      return {
        deliveryId: delivery.id,
        eventId: delivery.event_id,
        replayQueued: true as const,
        message: 'Replay queued; its attempt appears in the delivery history',
      };
    }),

  test: enterpriseProcedure
    .meta({
      openapi: {
        method: 'POST',
        path: '/api/v1/enterprise/webhooks/{webhookId}/test',
        tags,
        summary: 'Send a webhook.test event to this endpoint',
        protect: true,
      },
      flat: true,
    })
    .input(z.object({ webhookId: idParam }))
    .output(z.object({ message: z.string(), deliveryId: z.string() }))
    .mutation(async ({ ctx, input }) => {
      const hook = await ownedWebhook(ctx.deps, ctx.owner.id, input.webhookId);
      const event = webhookEvent(ctx.owner.id, 'webhook.test', { webhookId: hook.id, message: 'This is a test event sent from the webhook settings' });
      const { queued, deliveryIds } = await recordEvents(ctx.deps.database.db, [event], { onlyWebhookId: hook.id });
      wake(ctx.deps, queued);
      const deliveryId = deliveryIds[0];
      if (!deliveryId) throw webhookNotFound(); // deleted between the two statements
      return { message: `Test event queued for ${hook.url}; its outcome appears in the delivery history`, deliveryId };
    }),

  validate: enterpriseProcedure
    .meta({
      openapi: {
        method: 'POST',
        path: '/api/v1/enterprise/webhooks/{webhookId}/validate',
        tags,
        summary: 'Check that a URL (default: the saved one) is acceptable and reachable, without sending an event',
        protect: true,
      },
      flat: true,
    })
    .input(z.object({ webhookId: idParam, url: z.string().trim().min(1).max(2048).optional() }))
    .output(z.object({ valid: z.boolean(), message: z.string() }))
    .mutation(async ({ ctx, input }) => {
      const hook = await ownedWebhook(ctx.deps, ctx.owner.id, input.webhookId);
      const url = input.url ?? hook.url;
      const problem = await receiverUrlProblem(ctx.deps, url);
      if (problem) return { valid: false, message: `URL not acceptable: ${problem}` };
      try {
        // HEAD carries no event; any HTTP answer (even 404 or 405) proves the receiver is reachable.
        const res = await ctx.deps.http.request(url, { method: 'HEAD', timeoutMs: VALIDATE_TIMEOUT_MS, maxResponseBytes: 1024 });
        return { valid: true, message: `Reachable: the server answered ${res.status} to a HEAD request` };
      } catch (error) {
        return { valid: false, message: `Not reachable: ${(error as Error).message}` };
      }
    }),

  rotateSecret: enterpriseProcedure
    .meta({
      openapi: {
        method: 'POST',
        path: '/api/v1/enterprise/webhooks/{webhookId}/rotate-secret',
        tags,
        summary: 'Replace the signing secret; the old one keeps signing for 24 h',
        protect: true,
        errorResponses: { CONFLICT: 'The secret was rotated concurrently' },
      },
      flat: true,
    })
    .input(z.object({ webhookId: idParam }))
    .output(z.object({ secret: z.string(), message: z.string(), previousSecretValidUntil: z.string() }))
    .mutation(async ({ ctx, input }) => {
      const hook = await ownedWebhook(ctx.deps, ctx.owner.id, input.webhookId);
      const secret = generateSecret();
      const graceUntil = new Date(Date.now() + ROTATION_GRACE_MS);
      // Conditional on the secret read: of two concurrent rotations one wins, the other is told (never a secret
      // that was shown but not stored).
      const rotated = await repo.rotateSecret(ctx.deps.database.db, ctx.owner.id, hook.id, {
        from: hook.secret_enc,
        to: ctx.deps.secrets.seal(secret),
        previousValidUntil: graceUntil,
      });
      if (!rotated) throw new AppError('CONFLICT', 'The secret was rotated concurrently', 'Read the webhook again and retry');
      return {
        secret,
        previousSecretValidUntil: graceUntil.toISOString(),
        message:
          'New secret created; it is shown only this once. ' +
          'Until previousSecretValidUntil every delivery carries signatures of both the old and the new secret.',
      };
    }),
});
