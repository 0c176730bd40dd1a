import { z } from 'zod';
import { couponSchema, enterpriseSchema, promotionCodeSchema, stripePageInput } from '../../schema/billing.ts';
import { queryInt, toIso } from '../../schema/common.ts';
import { AppError } from '../../schema/errors.ts';
import { listOwners } from '../auth/repository.ts';
import { adminProcedure, type ErrorResponses, router } from '../trpc.ts';
import { countWebhooksByOwner } from '../webhooks/repository.ts';
import { toCoupon, toPromotionCode } from './coupons.ts';
import { planState } from './plan-state.ts';
import * as repo from './repository.ts';
import { callStripe, requireStripe } from './stripe-calls.ts';
import { isResourceMissing } from './stripe-errors.ts';

const tags = ['Admin'];
const couponIdParam = z.string().trim().min(1).max(200);
/** What requireStripe and stripeFailure throw; unreachable and refused are both 502, under one text. */
const providerFailed = 'The payment provider could not be reached or refused the request';
const stripeErrors = {
  UPSTREAM_CONNECTION_FAILED: providerFailed,
  UPSTREAM_ERROR: providerFailed,
  SERVICE_UNAVAILABLE: 'Billing is not configured on this service (code SERVICE_UNAVAILABLE)',
  UPSTREAM_TIMEOUT: 'The payment provider did not answer in time',
} satisfies ErrorResponses;
const page = <T>(items: T[], hasMore: boolean, idOf: (item: T) => string) => ({
  hasMore,
  nextCursor: hasMore && items.length > 0 ? idOf(items[items.length - 1]!) : null,
});

/** Admin views of billing: coupons and promotion codes as Stripe has them (read live, cursor-paginated), and enterprise accounts. */
export const billingAdminRouter = router({
  coupons: adminProcedure
    .meta({
      openapi: {
        method: 'GET',
        path: '/api/v1/admin/coupons',
        tags,
        summary: 'All coupons (from Stripe, paginated)',
        protect: true,
        errorResponses: stripeErrors,
      },
    })
    .input(stripePageInput)
    .output(z.object({ coupons: z.array(couponSchema), hasMore: z.boolean(), nextCursor: z.string().nullable() }))
    .query(async ({ ctx, input }) => {
      const stripe = requireStripe(ctx);
      const list = await callStripe(ctx, () =>
        stripe.coupons.list({ limit: input.limit, ...(input.startingAfter ? { starting_after: input.startingAfter } : {}) }),
      );
      return { coupons: list.data.map(toCoupon), ...page(list.data, list.has_more, (c) => c.id) };
    }),

  coupon: adminProcedure
    .meta({
      openapi: { method: 'GET', path: '/api/v1/admin/coupons/{couponId}', tags, summary: 'One coupon', protect: true, errorResponses: stripeErrors },
    })
    .input(z.object({ couponId: couponIdParam }))
    .output(z.object({ coupon: couponSchema }))
    .query(async ({ ctx, input }) => {
      const stripe = requireStripe(ctx);
      try {
        return { coupon: toCoupon(await stripe.coupons.retrieve(input.couponId)) };
      } catch (error) {
        if (isResourceMissing(error)) throw new AppError('NOT_FOUND', 'Coupon not found');
        return callStripe(ctx, () => Promise.reject(error));
      }
    }),

  promotionCodes: adminProcedure
    .meta({
      openapi: {
        method: 'GET',
        path: '/api/v1/admin/coupons/{couponId}/promotion-codes',
        tags,
        summary: 'The promotion codes of a coupon (paginated)',
        protect: true,
        errorResponses: stripeErrors,
      },
    })
    .input(stripePageInput.extend({ couponId: couponIdParam }))
    .output(z.object({ promotionCodes: z.array(promotionCodeSchema), hasMore: z.boolean(), nextCursor: z.string().nullable() }))
    .query(async ({ ctx, input }) => {
      const stripe = requireStripe(ctx);
      try {
        await stripe.coupons.retrieve(input.couponId);
      } catch (error) {
        if (isResourceMissing(error)) throw new AppError('NOT_FOUND', 'Coupon not found');
        return callStripe(ctx, () => Promise.reject(error));
      }
      const list = await callStripe(ctx, () =>
        stripe.promotionCodes.list({ coupon: input.couponId, limit: input.limit, ...(input.startingAfter ? { starting_after: input.startingAfter } : {}) }),
      );
      return { promotionCodes: list.data.map(toPromotionCode), ...page(list.data, list.has_more, (c) => c.id) };
    }),

  enterprises: adminProcedure
    .meta({
      openapi: {
        method: 'GET',
        path: '/api/v1/admin/enterprises',
        tags,
        summary: 'Enterprise accounts with their subscription state, this month’s usage and webhook count (newest first)',
        protect: true,
      },
    })
    .input(z.object({ limit: queryInt({ min: 1, max: 200 }).default(50), offset: queryInt({ min: 0, max: 1_000_000_000 }).default(0) }))
    .output(z.object({ enterprises: z.array(enterpriseSchema), total: z.number().int() }))
    .query(async ({ ctx, input }) => {
      const db = ctx.deps.database.db;
      const { rows, total } = await listOwners(db, { plan: 'enterprise' }, { limit: input.limit, offset: input.offset });
      const ids = rows.map((r) => r.id);
      const now = new Date();
      const [accounts, usage, webhooks] = await Promise.all([
        repo.accountsOf(db, ids),
        repo.usageOfOwners(db, ids, repo.monthStart(now)),
        countWebhooksByOwner(db, ids),
      ]);
      const accountOf = new Map(accounts.map((a) => [a.owner_id, a]));
      const usageOf = new Map(usage.map((u) => [u.owner_id, u]));
      return {
        total,
        enterprises: rows.map((owner) => {
          const account = accountOf.get(owner.id);
          const state = planState(account, owner.plan, now);
          return {
            ownerId: owner.id,
            email: owner.email,
            name: owner.name,
            status: state.status,
            source: state.source,
            currentPeriodEnd:
              state.source === 'stripe' ? toIso(account?.current_period_end ?? null) : state.source === 'trial' ? toIso(account?.trial_end ?? null) : null,
            messagesThisMonth: usageOf.get(owner.id)?.messages ?? 0,
            tokensThisMonth: usageOf.get(owner.id)?.tokens ?? 0,
            webhooks: webhooks.get(owner.id) ?? 0,
            createdAt: owner.created_at.toISOString(),
          };
        }),
      };
    }),
});
