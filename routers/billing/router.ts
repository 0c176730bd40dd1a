import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { signStripePayload, STRIPE_WEBHOOK_TOLERANCE_SECONDS, verifyStripeSignature, type Stripe } from '../../adapters/outbound/billing/stripe-client.ts';
import {
  checkoutInput,
  checkoutSessionSchema,
  couponInput,
  couponValidationSchema,
  portalInput,
  subscriptionSchema,
  trialInput,
  trialSweepSchema,
  webhookReceiptSchema,
  webhookTestSchema,
} from '../../schema/billing.ts';
import { toIso } from '../../schema/common.ts';
import { AppError } from '../../schema/errors.ts';
import { PLAN_RULES } from '../../schema/plans.ts';
import { findOwnerById, updateOwnerPlanAndRole } from '../auth/repository.ts';
import type { Context } from '../context.ts';
import { monthUsage } from './usage.ts';
import { billingSignatureProcedure, cronProcedure, type ErrorResponses, ownerProcedure, router } from '../trpc.ts';
import { webhookEvent, withEvents } from '../webhooks/outbox.ts';
import { supersedeOpenCheckout } from './checkout-sessions.ts';
import { validateCoupon } from './coupons.ts';
import { hasPendingOrLiveSubscription, planAfterTrial, planState, trialAvailable } from './plan-state.ts';
import * as repo from './repository.ts';
import { parseStripeEvent } from './stripe-event-shape.ts';
import { applyStripeEvent } from './stripe-events.ts';
import { billingNotConfigured } from './stripe-errors.ts';
import { callStripe, requireStripe } from './stripe-calls.ts';

const tags = ['Billing'];
const DAY_MS = 86_400_000;
const notConfigured = {
  SERVICE_UNAVAILABLE: 'Billing is not configured on this service (code SERVICE_UNAVAILABLE): set STRIPE_SECRET_KEY',
} satisfies ErrorResponses;
/** What stripeFailure makes of a failed Stripe call; unreachable and refused are both 502, under one text. */
const providerFailed = 'The payment provider could not be reached or refused the request';
const providerErrors = {
  UPSTREAM_CONNECTION_FAILED: providerFailed,
  UPSTREAM_ERROR: providerFailed,
  UPSTREAM_TIMEOUT: 'The payment provider did not answer in time',
} satisfies ErrorResponses;
/** A bad signature and a signed body that is no Stripe event are both 400, under one text. */
const webhookRefused = 'A bad Stripe-Signature, or a signed body that is not a well-formed Stripe event (details name what is wrong)';

/**
 * What Stripe posts to the webhook, for the document: the REST adapter hands the procedure this body as text (the
 * signature is over its bytes), and `contentSchema` says what the text holds. Only what the service requires
 * of every event is required here; parseStripeEvent checks the rest.
 */
const stripeEventBody = {
  type: 'object',
  description: 'A Stripe event object (https://docs.stripe.com/api/events/object), exactly as Stripe sends it',
  required: ['id', 'type'],
  properties: {
    id: { type: 'string', minLength: 1, maxLength: 255, description: 'The event id (evt_...): a redelivery of one event is applied once' },
    object: { type: 'string', description: 'Always `event`' },
    type: {
      type: 'string',
      minLength: 1,
      maxLength: 255,
      description:
        'The event type. Checkout, subscription and invoice events are applied (their `data.object` must carry the fields read); any other is answered `ignored`',
    },
    created: { type: 'integer', description: 'Unix seconds' },
    data: { type: 'object', properties: { object: { type: 'object', description: 'The Stripe object the event is about' } } },
  },
};

/** Return URLs must be on the service's own origins (PUBLIC_ORIGINS, else the origin this request came to): no open redirect. */
function returnUrl(ctx: Context, given: string | undefined, field: string, fallbackPath: string): string {
  const own = ctx.deps.config.PUBLIC_ORIGINS.length > 0 ? ctx.deps.config.PUBLIC_ORIGINS : ctx.host ? [`https://${ctx.host}`] : [];
  if (given === undefined) {
    if (own.length === 0) throw new AppError('VALIDATION_FAILED', 'Invalid request parameters', `${field}: required (no PUBLIC_ORIGINS configured)`);
    return `${own[0]}${fallbackPath}`;
  }
  if (!own.includes(new URL(given).origin)) {
    throw new AppError('VALIDATION_FAILED', 'Invalid request parameters', `${field}: must be on one of this service's origins (${own.join(', ')})`);
  }
  return given;
}

/** The owner's Stripe customer, created once: the idempotency key makes a retried create return the same customer. */
async function ensureCustomer(ctx: Context, stripe: Stripe, owner: { id: string; email: string; name: string | null }): Promise<string> {
  const account = await repo.findAccount(ctx.deps.database.db, owner.id);
  if (account?.stripe_customer_id) return account.stripe_customer_id;
  const customer = await callStripe(ctx, () =>
    stripe.customers.create(
      { email: owner.email, ...(owner.name ? { name: owner.name } : {}), metadata: { ownerId: owner.id } },
      { idempotencyKey: `customer-${owner.id}` },
    ),
  );
  return repo.saveCustomerId(ctx.deps.database.db, owner.id, customer.id);
}

export const billingRouter = router({
  subscription: ownerProcedure
    .meta({
      openapi: {
        method: 'GET',
        path: '/api/v1/user/subscription',
        tags,
        summary: 'Your plan, its state and limits, and this month’s usage next to them',
        protect: true,
      },
    })
    .input(z.object({}).optional())
    .output(z.object({ subscription: subscriptionSchema }))
    .query(async ({ ctx }) => {
      const db = ctx.deps.database.db;
      const now = new Date();
      const [account, usage] = await Promise.all([repo.findAccount(db, ctx.owner.id), monthUsage(db, ctx.owner.id, now)]);
      const state = planState(account, ctx.owner.plan, now);
      // The period shown: the subscription's, the trial's (start to end), else the calendar month usage counts in.
      const period =
        state.source === 'stripe' && account?.current_period_start && account.current_period_end
          ? { start: account.current_period_start.toISOString(), end: account.current_period_end.toISOString() }
          : state.source === 'trial' && account?.trial_started_at && account.trial_end
            ? { start: account.trial_started_at.toISOString(), end: account.trial_end.toISOString() }
            : { start: usage.periodStart, end: usage.periodEnd };
      return {
        subscription: {
          plan: ctx.owner.plan,
          status: state.status,
          source: state.source,
          billingConfigured: ctx.deps.stripe !== undefined,
          interval: state.source === 'stripe' ? (account?.billing_interval ?? null) : null,
          currentPeriodStart: period.start,
          currentPeriodEnd: period.end,
          cancelAtPeriodEnd: state.source === 'stripe' ? (account?.cancel_at_period_end ?? false) : false,
          trialEnd: state.source === 'trial' ? toIso(account!.trial_end) : state.source === 'stripe' ? toIso(account?.subscription_trial_end ?? null) : null,
          trialAvailable: trialAvailable(account, ctx.owner.plan),
          limits: PLAN_RULES[ctx.owner.plan],
          usage,
        },
      };
    }),

  startTrial: ownerProcedure
    .meta({
      openapi: {
        method: 'POST',
        path: '/api/v1/user/subscription/trial',
        tags,
        summary: 'Start the one free trial of a paid plan (TRIAL_DAYS long, no card)',
        description: 'Not in the spec’s list: how an owner starts the trial that POST /api/v1/cron/trial-expiration ends. Emits `subscription.created`.',
        protect: true,
        errorResponses: { CONFLICT: 'The trial was already used, or the owner is not on the free plan' },
      },
      successStatus: 201,
    })
    .input(trialInput)
    .output(z.object({ subscription: z.object({ plan: z.enum(['premium', 'enterprise']), status: z.literal('trialing'), trialEnd: z.string() }) }))
    .mutation(async ({ ctx, input }) => {
      const plan = input?.plan ?? 'premium';
      const now = new Date();
      const end = new Date(now.getTime() + ctx.deps.config.TRIAL_DAYS * DAY_MS);
      const started = await withEvents(
        ctx.deps,
        async (trx) => {
          const account = await repo.lockAccount(trx, ctx.owner.id);
          const owner = await findOwnerById(trx, ctx.owner.id);
          if (!owner || !trialAvailable(account, owner.plan)) {
            throw new AppError('CONFLICT', 'No trial available', 'The one free trial was already used, or you are not on the free plan');
          }
          const saved = await repo.saveTrial(trx, ctx.owner.id, plan, now, end);
          await updateOwnerPlanAndRole(trx, ctx.owner.id, { plan });
          return saved;
        },
        (saved) => [
          webhookEvent(ctx.owner.id, 'subscription.created', {
            ownerId: ctx.owner.id,
            plan,
            status: 'trialing',
            stripeSubscriptionId: saved.stripe_subscription_id,
            currentPeriodEnd: end.toISOString(),
            cancelAtPeriodEnd: false,
            trialEnd: end.toISOString(),
          }),
        ],
      );
      // The plan rides in the cached session: this instance drops it now, the others on the change notification.
      ctx.deps.sessionCache.forgetOwner(ctx.owner.id);
      return { subscription: { plan, status: 'trialing' as const, trialEnd: started.trial_end!.toISOString() } };
    }),

  checkout: ownerProcedure
    .meta({
      openapi: {
        method: 'POST',
        path: '/api/v1/payments/checkout',
        tags,
        summary: 'A Stripe Checkout Session for a paid plan; send the owner to its url',
        description:
          'One Stripe customer per owner, created once, and one payable Checkout page: a new checkout expires the previous one. `promotionCode` is applied when valid (400 naming the reason when not); without it the Checkout page lets the customer enter one. Return URLs must be on the service’s own origins.',
        protect: true,
        errorResponses: {
          CONFLICT:
            'Already subscribed (change the plan in the customer portal), the first payment of a subscription is still pending, or the Checkout page opened before this one has just been paid',
          ...notConfigured,
          ...providerErrors,
          UPSTREAM_INVALID_RESPONSE: 'The payment provider returned no checkout page',
        },
      },
      successStatus: 201,
    })
    .input(checkoutInput)
    .output(z.object({ checkoutSession: checkoutSessionSchema }))
    .mutation(async ({ ctx, input }) => {
      const stripe = requireStripe(ctx);
      const price = ctx.deps.config.STRIPE_PRICES[`${input.plan}:${input.interval}`];
      if (!price) throw new AppError('VALIDATION_FAILED', 'Invalid request parameters', `interval: ${input.plan} is not sold ${input.interval}ly here`);
      const successUrl = returnUrl(ctx, input.successUrl, 'successUrl', '/?checkout=success&session_id={CHECKOUT_SESSION_ID}');
      const cancelUrl = returnUrl(ctx, input.cancelUrl, 'cancelUrl', '/?checkout=canceled');
      const db = ctx.deps.database.db;
      if (hasPendingOrLiveSubscription(await repo.findAccount(db, ctx.owner.id))) {
        throw new AppError('CONFLICT', 'Already subscribed', 'Change or cancel the subscription in the customer portal (POST /api/v1/payments/portal)');
      }
      let promotionCodeId: string | undefined;
      if (input.promotionCode) {
        const check = await validateCoupon(ctx, stripe, ctx.owner.id, input.promotionCode, input.plan);
        if (!check.valid || !check.promotionCodeId) {
          throw new AppError('VALIDATION_FAILED', 'Invalid request parameters', `promotionCode: ${check.reason ?? 'not a promotion code'}`);
        }
        promotionCodeId = check.promotionCodeId;
      }
      const customer = await ensureCustomer(ctx, stripe, ctx.owner);
      const session = await callStripe(ctx, () =>
        stripe.checkout.sessions.create(
          {
            mode: 'subscription',
            customer,
            client_reference_id: ctx.owner.id,
            line_items: [{ price, quantity: 1 }],
            success_url: successUrl,
            cancel_url: cancelUrl,
            metadata: { ownerId: ctx.owner.id, plan: input.plan },
            subscription_data: { metadata: { ownerId: ctx.owner.id, plan: input.plan } },
            ...(promotionCodeId ? { discounts: [{ promotion_code: promotionCodeId }] } : { allow_promotion_codes: true }),
          },
          { idempotencyKey: `checkout-${ctx.owner.id}-${randomUUID()}` },
        ),
      );
      if (!session.url) throw new AppError('UPSTREAM_INVALID_RESPONSE', 'The payment provider returned no checkout page');
      await supersedeOpenCheckout(ctx, stripe, ctx.owner.id, session.id);
      return { checkoutSession: { id: session.id, url: session.url, expiresAt: new Date(session.expires_at * 1000).toISOString() } };
    }),

  portal: ownerProcedure
    .meta({
      openapi: {
        method: 'POST',
        path: '/api/v1/payments/portal',
        tags,
        summary: 'A Stripe customer-portal session: change plan, payment method, cancel',
        protect: true,
        errorResponses: { CONFLICT: 'No billing account yet: subscribe through checkout first', ...notConfigured, ...providerErrors },
      },
      successStatus: 201,
    })
    .input(portalInput)
    .output(z.object({ portalSession: z.object({ id: z.string(), url: z.string() }) }))
    .mutation(async ({ ctx, input }) => {
      const stripe = requireStripe(ctx);
      const back = returnUrl(ctx, input?.returnUrl, 'returnUrl', '/');
      const account = await repo.findAccount(ctx.deps.database.db, ctx.owner.id);
      if (!account?.stripe_customer_id) throw new AppError('CONFLICT', 'No billing account yet', 'Subscribe through POST /api/v1/payments/checkout first');
      const customer = account.stripe_customer_id;
      const session = await callStripe(ctx, () =>
        stripe.billingPortal.sessions.create({ customer, return_url: back }, { idempotencyKey: `portal-${ctx.owner.id}-${randomUUID()}` }),
      );
      return { portalSession: { id: session.id, url: session.url } };
    }),

  validateCoupon: ownerProcedure
    .meta({
      openapi: {
        method: 'POST',
        path: '/api/v1/payments/validate-coupon',
        tags,
        summary: 'Whether a promotion code (or coupon id) can be used now, for a plan, and its discount',
        protect: true,
        errorResponses: { ...notConfigured, ...providerErrors },
      },
    })
    .input(couponInput)
    .output(z.object({ coupon: couponValidationSchema }))
    .mutation(async ({ ctx, input }) => ({ coupon: await validateCoupon(ctx, requireStripe(ctx), ctx.owner.id, input.code, input.plan) })),

  webhook: billingSignatureProcedure
    .meta({
      openapi: {
        method: 'POST',
        path: '/api/v1/payments/webhook',
        tags,
        summary: 'Stripe events (checkout, subscriptions, invoices), verified by Stripe-Signature',
        description:
          'The signature is checked on the raw body with a 300 s tolerance; a bad one is a 400 and changes nothing. A signed body that is not a well-formed event (not a JSON object, no string id or type, or an event we act on without the object fields we read) is a 400 naming what is wrong, and changes nothing. Each event is applied once (a redelivery answers `duplicate`), from the subscription as Stripe shows it now.',
        errorResponses: {
          BAD_REQUEST: webhookRefused,
          VALIDATION_FAILED: webhookRefused,
          ...notConfigured,
          ...providerErrors,
          UPSTREAM_INVALID_RESPONSE: 'The payment provider answered a subscription that cannot be used (Stripe delivers the event again)',
        },
      },
      rawBody: { signatureHeader: 'Stripe-Signature' },
    })
    .input(
      z.object({
        payload: z.string().meta({
          description: 'The Stripe event as JSON, exactly as Stripe sends it (the signature covers these bytes)',
          contentMediaType: 'application/json',
          contentSchema: stripeEventBody,
        }),
        signature: z
          .string()
          .max(4096)
          .meta({ description: 'Stripe-Signature: `t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<raw body>">` under the endpoint secret (whsec_...)' }),
      }),
    )
    .output(webhookReceiptSchema)
    .mutation(async ({ ctx, input }) => {
      const stripe = requireStripe(ctx);
      const secret = ctx.deps.config.STRIPE_WEBHOOK_SECRET;
      if (!secret) throw billingNotConfigured();
      try {
        verifyStripeSignature(input.payload, input.signature, secret);
      } catch {
        ctx.deps.securityEvents.record('billing_signature_invalid', { ip: ctx.clientIp, detail: { signed: input.signature !== '' } });
        throw new AppError('BAD_REQUEST', 'Invalid signature', 'Stripe-Signature does not match the body, or its timestamp is outside the 300 s tolerance');
      }
      // A malformed event is a 400, as Stripe's own libraries answer a payload they cannot read. Stripe retries any
      // non-2xx delivery (for up to three days in live mode), so nothing is lost if one ever comes from Stripe: it
      // shows as failing in Stripe's dashboard instead of being acknowledged and dropped.
      let event: Stripe.Event;
      try {
        event = parseStripeEvent(input.payload);
      } catch (error) {
        ctx.deps.logger.warn('billing webhook: signed body is not a well-formed event', { requestId: ctx.requestId, details: (error as AppError).details });
        throw error;
      }
      // Not wrapped in callStripe: only its one Stripe call is the provider's; a failure of ours stays a 500.
      const outcome = await applyStripeEvent(
        {
          database: ctx.deps.database,
          webhookJobs: ctx.deps.webhookJobs,
          config: ctx.deps.config,
          logger: ctx.deps.logger,
          stripe,
          sessionCache: ctx.deps.sessionCache,
          requestId: ctx.requestId,
        },
        event,
      );
      return { received: true as const, eventId: event.id, type: event.type, outcome };
    }),

  webhookTest: ownerProcedure
    .meta({
      openapi: {
        method: 'POST',
        path: '/api/v1/payments/webhook-test',
        tags,
        summary: 'Checks the billing webhook set-up: a test event signed with the configured secret goes through the real verification',
        description: 'Changes no subscription. `configured` is false (and nothing else is checked) when STRIPE_WEBHOOK_SECRET is unset.',
        protect: true,
      },
    })
    .input(z.object({}).optional())
    .output(z.object({ result: webhookTestSchema }))
    .mutation(({ ctx }) => {
      const secret = ctx.deps.config.STRIPE_WEBHOOK_SECRET;
      const base = { toleranceSeconds: STRIPE_WEBHOOK_TOLERANCE_SECONDS, eventType: 'svc.webhook_test' };
      if (!secret) {
        return { result: { ...base, configured: false, signatureVerified: false, tamperedRejected: false, message: 'STRIPE_WEBHOOK_SECRET is not set' } };
      }
      const payload = JSON.stringify({
        id: `evt_test_${randomUUID().replaceAll('-', '')}`,
        object: 'event',
        type: base.eventType,
        created: Math.floor(Date.now() / 1000),
        data: { object: { requestedBy: ctx.owner.id } },
      });
      const signature = signStripePayload(payload, secret);
      const accepts = (body: string) => {
        try {
          verifyStripeSignature(body, signature, secret);
          return true;
        } catch {
          return false;
        }
      };
      const signatureVerified = accepts(payload);
      const tamperedRejected = !accepts(payload.replace(base.eventType, 'svc.webhook_tampered'));
      const ok = signatureVerified && tamperedRejected;
      return {
        result: {
          ...base,
          configured: true,
          signatureVerified,
          tamperedRejected,
          message: ok
            ? 'The configured secret signs and verifies; point Stripe at POST /api/v1/payments/webhook with the same secret'
            : 'Verification did not behave as expected',
        },
      };
    }),

  trialExpiration: cronProcedure
    .meta({
      openapi: {
        method: 'POST',
        path: '/api/v1/cron/trial-expiration',
        tags,
        summary: 'Ends expired trials: back to free, or to the paid plan when a subscription exists (idempotent)',
        description: 'Emits `subscription.trial_expired` per owner. Two concurrent runs end each trial once.',
      },
    })
    .input(z.object({}).optional())
    .output(trialSweepSchema)
    .mutation(async ({ ctx }) => {
      const now = new Date();
      const ended = await withEvents(
        ctx.deps,
        async (trx) => {
          const rows = await repo.expireTrials(trx, now);
          const results: Array<{ ownerId: string; plan: 'free' | 'premium' | 'enterprise'; row: repo.BillingAccountRow }> = [];
          for (const row of rows) {
            const plan = planAfterTrial(row);
            await updateOwnerPlanAndRole(trx, row.owner_id, { plan });
            results.push({ ownerId: row.owner_id, plan, row });
          }
          return results;
        },
        (results) =>
          results.map(({ ownerId, plan, row }) =>
            webhookEvent(ownerId, 'subscription.trial_expired', {
              ownerId,
              plan,
              status: plan === 'free' ? 'canceled' : ((row.subscription_status as 'active') ?? 'active'),
              stripeSubscriptionId: row.stripe_subscription_id,
              currentPeriodEnd: toIso(row.current_period_end),
              cancelAtPeriodEnd: row.cancel_at_period_end,
              trialEnd: toIso(row.trial_end),
            }),
          ),
      );
      for (const { ownerId } of ended) ctx.deps.sessionCache.forgetOwner(ownerId);
      return { expired: ended.length, owners: ended.map(({ ownerId, plan }) => ({ ownerId, plan })) };
    }),
});
