import { z } from 'zod';
import { queryInt, timestamp } from './common.ts';
import { planSchema } from './owners.ts';

export const subscriptionStatusSchema = z.enum(['active', 'trialing', 'past_due', 'canceled', 'unpaid', 'incomplete', 'incomplete_expired', 'paused']);
export const paidPlanSchema = z.enum(['premium', 'enterprise']);
export const billingIntervalSchema = z.enum(['month', 'year']);

export const subscriptionSchema = z
  .object({
    plan: planSchema,
    status: subscriptionStatusSchema.meta({
      description: "The plan's state: Stripe's subscription status, `trialing` during the free trial, `active` for a plan an admin set",
    }),
    source: z.enum(['stripe', 'trial', 'admin']).meta({ description: 'What the plan comes from' }),
    billingConfigured: z.boolean().meta({ description: 'Whether payments are set up on this service; without them admins set plans' }),
    interval: billingIntervalSchema.nullable(),
    currentPeriodStart: timestamp,
    currentPeriodEnd: timestamp,
    cancelAtPeriodEnd: z.boolean(),
    trialEnd: timestamp.nullable(),
    trialAvailable: z.boolean().meta({ description: 'Whether the owner may still start the one free trial' }),
    limits: z.object({
      uploadBytes: z.number().int().meta({ description: 'Largest document upload' }),
      enterpriseWebhooks: z.boolean().meta({ description: 'Whether the enterprise webhook routes are open' }),
    }),
    usage: z.object({
      periodStart: timestamp,
      periodEnd: timestamp,
      messages: z.number().int().meta({ description: 'Visitor messages answered this calendar month (UTC)' }),
      queries: z.number().int().meta({ description: 'Knowledge-base queries answered this calendar month (UTC)' }),
      tokensIn: z.number().int().meta({ description: 'Prompt tokens of those answers' }),
      tokensOut: z.number().int().meta({ description: 'Completion tokens of those answers' }),
      documents: z.number().int().meta({ description: 'Documents stored now' }),
      storageBytes: z.number().int().meta({ description: 'Bytes of documents stored now' }),
    }),
  })
  .meta({ id: 'Subscription' });

/** `data` of the subscription.* webhook events. */
export const subscriptionEventSchema = z.object({
  ownerId: z.string(),
  plan: planSchema,
  status: subscriptionStatusSchema,
  stripeSubscriptionId: z.string().nullable(),
  currentPeriodEnd: timestamp.nullable(),
  cancelAtPeriodEnd: z.boolean(),
  trialEnd: timestamp.nullable(),
});

export const invoicePaymentFailedSchema = z.object({
  ownerId: z.string(),
  invoiceId: z.string(),
  stripeSubscriptionId: z.string().nullable(),
  amountDue: z.number().int().meta({ description: 'In the smallest currency unit' }),
  currency: z.string(),
  attemptCount: z.number().int(),
  nextPaymentAttempt: timestamp.nullable(),
});

const returnUrl = z.string().max(2000).url();

export const trialInput = z.object({ plan: paidPlanSchema.default('premium') }).optional();

export const checkoutInput = z.object({
  plan: paidPlanSchema,
  interval: billingIntervalSchema.default('month'),
  promotionCode: z.string().trim().min(1).max(100).optional().meta({ description: 'A promotion code customers type (e.g. SPRING25)' }),
  successUrl: returnUrl.optional().meta({ description: "Must be on one of the service's own origins" }),
  cancelUrl: returnUrl.optional().meta({ description: "Must be on one of the service's own origins" }),
});

export const checkoutSessionSchema = z.object({ id: z.string(), url: z.string(), expiresAt: timestamp });

export const portalInput = z.object({ returnUrl: returnUrl.optional() }).optional();

export const couponInput = z.object({ code: z.string().trim().min(1).max(100), plan: paidPlanSchema.optional() });

export const discountSchema = z.object({
  percentOff: z.number().nullable(),
  amountOff: z.number().int().nullable().meta({ description: 'In the smallest currency unit' }),
  currency: z.string().nullable(),
  duration: z.enum(['forever', 'once', 'repeating']),
  durationInMonths: z.number().int().nullable(),
});

export const couponValidationSchema = z.object({
  valid: z.boolean(),
  code: z.string(),
  reason: z
    .enum(['not_found', 'inactive', 'expired', 'used_up', 'first_purchase_only', 'not_for_plan'])
    .nullable()
    .meta({ description: 'Why it cannot be used now; null when valid' }),
  couponId: z.string().nullable(),
  promotionCodeId: z.string().nullable(),
  discount: discountSchema.nullable(),
  expiresAt: timestamp.nullable(),
});

export const webhookReceiptSchema = z.object({
  received: z.literal(true),
  eventId: z.string(),
  type: z.string(),
  outcome: z
    .enum(['applied', 'duplicate', 'ignored'])
    .meta({ description: 'applied; already seen (changed nothing); or not acted on (an unhandled type, or a superseded subscription)' }),
});

export const webhookTestSchema = z.object({
  configured: z.boolean(),
  signatureVerified: z.boolean().meta({ description: 'A test event signed with the configured secret passed the verification the real endpoint uses' }),
  tamperedRejected: z.boolean().meta({ description: 'The same event with its body altered was refused' }),
  toleranceSeconds: z.number().int(),
  eventType: z.string(),
  message: z.string(),
});

export const trialSweepSchema = z.object({
  expired: z.number().int(),
  owners: z.array(z.object({ ownerId: z.string(), plan: planSchema })),
});

export const couponSchema = z
  .object({
    id: z.string(),
    name: z.string().nullable(),
    valid: z.boolean(),
    discount: discountSchema,
    maxRedemptions: z.number().int().nullable(),
    timesRedeemed: z.number().int(),
    redeemBy: timestamp.nullable(),
    createdAt: timestamp,
  })
  .meta({ id: 'Coupon' });

export const promotionCodeSchema = z
  .object({
    id: z.string(),
    code: z.string(),
    active: z.boolean(),
    couponId: z.string().nullable(),
    maxRedemptions: z.number().int().nullable(),
    timesRedeemed: z.number().int(),
    expiresAt: timestamp.nullable(),
    firstTimeTransaction: z.boolean(),
    createdAt: timestamp,
  })
  .meta({ id: 'PromotionCode' });

export const stripePageInput = z.object({
  limit: queryInt({ min: 1, max: 100 }).default(20),
  startingAfter: z.string().max(200).optional().meta({ description: 'nextCursor of the previous page' }),
});

export const enterpriseSchema = z
  .object({
    ownerId: z.string(),
    email: z.string(),
    name: z.string().nullable(),
    status: subscriptionStatusSchema,
    source: z.enum(['stripe', 'trial', 'admin']),
    currentPeriodEnd: timestamp.nullable(),
    messagesThisMonth: z.number().int(),
    tokensThisMonth: z.number().int(),
    webhooks: z.number().int(),
    createdAt: timestamp,
  })
  .meta({ id: 'Enterprise' });
