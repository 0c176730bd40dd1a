import type { z } from 'zod';
import type { Stripe } from '../../adapters/outbound/billing/stripe-client.ts';
import type { couponSchema, couponValidationSchema, discountSchema, promotionCodeSchema } from '../../schema/billing.ts';
import type { Context } from '../context.ts';
import * as repo from './repository.ts';
import { callStripe } from './stripe-calls.ts';
import { isResourceMissing } from './stripe-errors.ts';

type Validation = z.infer<typeof couponValidationSchema>;
type Reason = NonNullable<Validation['reason']>;

const iso = (seconds: number | null | undefined) => (typeof seconds === 'number' ? new Date(seconds * 1000).toISOString() : null);

const durationOf = (value: string): 'once' | 'repeating' | 'forever' => (value === 'once' ? 'once' : value === 'repeating' ? 'repeating' : 'forever');

export const discountOf = (coupon: Stripe.Coupon): z.infer<typeof discountSchema> => ({
  percentOff: coupon.percent_off,
  amountOff: coupon.amount_off,
  currency: coupon.currency,
  duration: durationOf(coupon.duration),
  durationInMonths: coupon.duration_in_months,
});

export const toCoupon = (coupon: Stripe.Coupon): z.infer<typeof couponSchema> => ({
  id: coupon.id,
  name: coupon.name,
  valid: coupon.valid,
  discount: discountOf(coupon),
  maxRedemptions: coupon.max_redemptions,
  timesRedeemed: coupon.times_redeemed,
  redeemBy: iso(coupon.redeem_by),
  createdAt: iso(coupon.created)!,
});

export const toPromotionCode = (code: Stripe.PromotionCode): z.infer<typeof promotionCodeSchema> => ({
  id: code.id,
  code: code.code,
  active: code.active,
  couponId: typeof code.promotion?.coupon === 'string' ? code.promotion.coupon : (code.promotion?.coupon?.id ?? null),
  maxRedemptions: code.max_redemptions,
  timesRedeemed: code.times_redeemed,
  expiresAt: iso(code.expires_at),
  firstTimeTransaction: code.restrictions?.first_time_transaction ?? false,
  createdAt: iso(code.created)!,
});

/** Why a coupon cannot be used now (null when it can), checked in the order a customer would want to hear it. */
function couponProblem(coupon: Stripe.Coupon, nowSeconds: number): Reason | null {
  if (coupon.redeem_by !== null && coupon.redeem_by <= nowSeconds) return 'expired';
  if (coupon.max_redemptions !== null && coupon.times_redeemed >= coupon.max_redemptions) return 'used_up';
  if (!coupon.valid) return 'inactive';
  return null;
}

async function planProduct(ctx: Context, stripe: Stripe, plan: 'premium' | 'enterprise'): Promise<Set<string>> {
  const prices = Object.entries(ctx.deps.config.STRIPE_PRICES)
    .filter(([key]) => key.startsWith(`${plan}:`))
    .map(([, id]) => id);
  const products = await Promise.all(prices.map((id) => callStripe(ctx, () => stripe.prices.retrieve(id))));
  return new Set(products.map((price) => (typeof price.product === 'string' ? price.product : price.product.id)));
}

/**
 * A promotion code (what customers type) or, failing that, a coupon id. Stripe decides the discount at checkout;
 * this answers early, with the reason a customer can act on.
 */
export async function validateCoupon(
  ctx: Context,
  stripe: Stripe,
  ownerId: string,
  code: string,
  plan: 'premium' | 'enterprise' | undefined,
): Promise<Validation> {
  const nowSeconds = Math.floor(Date.now() / 1000);
  const refuse = (reason: Reason, found: Partial<Validation> = {}): Validation => ({
    valid: false,
    code,
    reason,
    couponId: null,
    promotionCodeId: null,
    discount: null,
    expiresAt: null,
    ...found,
  });
  const promotion = (await callStripe(ctx, () => stripe.promotionCodes.list({ code, limit: 1 }))).data[0];
  let coupon: Stripe.Coupon;
  if (promotion) {
    const ref = promotion.promotion?.coupon;
    if (!ref) return refuse('not_found');
    coupon = typeof ref === 'string' ? await callStripe(ctx, () => stripe.coupons.retrieve(ref)) : ref;
  } else {
    try {
      coupon = await stripe.coupons.retrieve(code);
    } catch (error) {
      if (isResourceMissing(error)) return refuse('not_found');
      return callStripe(ctx, () => Promise.reject(error));
    }
  }
  const found: Partial<Validation> = {
    couponId: coupon.id,
    promotionCodeId: promotion?.id ?? null,
    discount: discountOf(coupon),
    expiresAt: iso(promotion?.expires_at ?? coupon.redeem_by),
  };
  if (promotion) {
    if (promotion.expires_at !== null && promotion.expires_at <= nowSeconds) return refuse('expired', found);
    if (promotion.max_redemptions !== null && promotion.times_redeemed >= promotion.max_redemptions) return refuse('used_up', found);
    if (!promotion.active) return refuse('inactive', found);
  }
  const problem = couponProblem(coupon, nowSeconds);
  if (problem) return refuse(problem, found);
  if (promotion?.restrictions?.first_time_transaction) {
    const account = await repo.findAccount(ctx.deps.database.db, ownerId);
    if (account?.stripe_subscription_id) return refuse('first_purchase_only', found);
  }
  const products = coupon.applies_to?.products ?? [];
  if (plan && products.length > 0) {
    const planProducts = await planProduct(ctx, stripe, plan);
    if (!products.some((p) => planProducts.has(p))) return refuse('not_for_plan', found);
  }
  return {
    valid: true,
    code,
    reason: null,
    couponId: coupon.id,
    promotionCodeId: promotion?.id ?? null,
    discount: discountOf(coupon),
    expiresAt: found.expiresAt ?? null,
  };
}
