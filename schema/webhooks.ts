import { z } from 'zod';
import { bookingEventSchema } from './bookings.ts';
import { accountEventSchema } from './toolhub.ts';
import { ticketEventSchema } from './support.ts';
import { idParam, queryInt, saveWarningsSchema, timestamp } from './common.ts';
import { apiKeySchema } from './api-keys.ts';
import { chatInterfaceSchema } from './chat-interfaces.ts';
import { kbConfigSchema, kbDocumentSchema } from './knowledge-base.ts';
import { leadSchema } from './visitors.ts';
import { invoicePaymentFailedSchema, subscriptionEventSchema } from './billing.ts';
import { certificateFailedEventSchema, domainEventSchema } from './domains.ts';

const deletedData = z.object({ id: z.string() });
const chatMessageData = z.object({
  messageId: z.string(),
  sessionId: z.string(),
  chatInterfaceId: z.string(),
  role: z.enum(['user', 'assistant', 'operator']),
  content: z.string(),
});

/**
 * The event catalogue: every event type and the schema of its `data`. Adding an event for a later area
 * (bookings, billing, support, domains) is one line here plus the one call that emits it; the OpenAPI
 * document, the subscription validation and the GraphQL enum all read this table.
 */
export const WEBHOOK_EVENTS = {
  'document.completed': kbDocumentSchema,
  'document.failed': kbDocumentSchema,
  'document.deleted': z.object({ id: z.string(), configId: z.string() }),
  'chat_session.created': z.object({ sessionId: z.string(), chatInterfaceId: z.string() }),
  'chat_message.created': chatMessageData,
  'api_key.created': apiKeySchema,
  'api_key.updated': apiKeySchema,
  'api_key.deleted': deletedData,
  'chat_interface.created': chatInterfaceSchema,
  'chat_interface.updated': chatInterfaceSchema,
  'chat_interface.deleted': deletedData,
  'knowledge_base.created': kbConfigSchema,
  'knowledge_base.updated': kbConfigSchema,
  'knowledge_base.deleted': deletedData,
  'lead.created': leadSchema,
  'subscription.created': subscriptionEventSchema,
  'subscription.updated': subscriptionEventSchema,
  'subscription.canceled': subscriptionEventSchema,
  'subscription.trial_ending': subscriptionEventSchema,
  'subscription.trial_expired': subscriptionEventSchema,
  'invoice.payment_failed': invoicePaymentFailedSchema,
  'domain.verified': domainEventSchema,
  'domain.activated': domainEventSchema,
  'domain.deactivated': domainEventSchema,
  'domain.certificate_failed': certificateFailedEventSchema,
  'booking.created': bookingEventSchema,
  'booking.cancelled': bookingEventSchema,
  'toolhub_account.expired': accountEventSchema,
  'support_ticket.created': ticketEventSchema,
  'support_ticket.updated': ticketEventSchema,
  'webhook.test': z.object({ webhookId: z.string(), message: z.string() }),
  'webhook.disabled': z.object({ webhookId: z.string(), url: z.string(), reason: z.enum(['gone', 'failing']), message: z.string() }),
} as const;

export type WebhookEventType = keyof typeof WEBHOOK_EVENTS;
export type WebhookEventData<T extends WebhookEventType> = z.input<(typeof WEBHOOK_EVENTS)[T]>;
export const WEBHOOK_EVENT_TYPES = Object.keys(WEBHOOK_EVENTS) as WebhookEventType[];
export const isWebhookEventType = (value: string): value is WebhookEventType => Object.hasOwn(WEBHOOK_EVENTS, value);

const eventsField = z
  .array(z.string().trim().min(1).max(100))
  .min(1)
  .max(WEBHOOK_EVENT_TYPES.length + 1)
  .superRefine((events, ctx) => {
    for (const [i, e] of events.entries()) {
      if (e !== '*' && !isWebhookEventType(e))
        ctx.addIssue({ code: 'custom', path: [i], message: `unknown event type '${e}'; known: *, ${WEBHOOK_EVENT_TYPES.join(', ')}` });
    }
  })
  .meta({ description: "Event types to receive; '*' means all", example: ['document.completed', 'api_key.created'] });

const secretField = z.string().max(200).meta({
  description: 'Signing secret: `whsec_` followed by the base64 of 24 to 64 random bytes. Omit it and one is generated and shown once.',
});
const urlField = z.string().trim().min(1).max(2048).meta({ description: 'Receiver URL (https; a public address)', example: 'https://example.com/hooks' });

export const createWebhookInput = z.object({
  url: urlField,
  events: eventsField.optional(),
  secret: secretField.optional(),
  enabled: z.boolean().optional(),
  description: z.string().trim().max(500).optional(),
});

export const updateWebhookInput = z
  .object({
    webhookId: idParam,
    url: urlField.optional(),
    events: eventsField.optional(),
    enabled: z.boolean().optional(),
    description: z.string().trim().max(500).nullable().optional(),
  })
  .refine((v) => v.url !== undefined || v.events !== undefined || v.enabled !== undefined || v.description !== undefined, {
    message: 'give url, events, enabled or description',
    path: ['url'],
  });

export const webhookStatsSchema = z
  .object({
    deliveries: z.number().int(),
    succeeded: z.number().int(),
    failed: z.number().int().meta({ description: 'Deliveries whose last attempt failed (retrying or exhausted)' }),
    pending: z.number().int(),
    successRate: z.number().nullable().meta({ description: 'succeeded / (succeeded + failed), null before any outcome' }),
    lastFailureAt: timestamp.nullable(),
    lastFailureStatus: z.number().int().nullable(),
    lastSuccessAt: timestamp.nullable(),
  })
  .meta({ id: 'WebhookStats' });

export const webhookSchema = z
  .object({
    id: z.string(),
    url: z.string(),
    description: z.string().nullable(),
    events: z.array(z.string()),
    enabled: z.boolean(),
    disabledReason: z.string().nullable().meta({
      description:
        "Why delivery stopped: 'gone' (the receiver answered 410), 'failing' (5 days without a success), 'owner', or 'account_linked' (the account was claimed by its verified owner through single sign-on: endpoints its creator set up wait for review)",
    }),
    disabledAt: timestamp.nullable(),
    secretRotationGraceUntil: timestamp.nullable().meta({ description: 'Until then deliveries are signed with the previous secret too' }),
    failingSince: timestamp.nullable(),
    createdAt: timestamp,
    updatedAt: timestamp,
  })
  .meta({ id: 'Webhook' });

export const createdWebhookSchema = z.object({
  webhook: webhookSchema,
  secret: z.string().optional().meta({ description: 'The generated signing secret, shown only in this response (absent when you supplied one)' }),
  warnings: saveWarningsSchema,
});

export const deliveryStatusSchema = z.enum(['pending', 'succeeded', 'failed', 'exhausted']);

export const deliveryAttemptSchema = z.object({
  at: timestamp,
  trigger: z.enum(['automatic', 'replay']),
  httpStatus: z.number().int().nullable(),
  latencyMs: z.number(),
  responseExcerpt: z.string().nullable().meta({ description: 'The first 500 characters of the response body, as text' }),
  error: z.string().nullable(),
});

export const webhookDeliverySchema = z
  .object({
    deliveryId: z.string(),
    webhookId: z.string(),
    eventId: z.string(),
    eventType: z.string(),
    status: deliveryStatusSchema,
    attemptCount: z.number().int(),
    attempts: z.array(deliveryAttemptSchema),
    nextAttemptAt: timestamp.nullable(),
    lastHttpStatus: z.number().int().nullable(),
    createdAt: timestamp,
  })
  .meta({ id: 'WebhookDelivery' });

export const listDeliveriesInput = z.object({
  webhookId: idParam,
  limit: queryInt({ min: 1, max: 100 }).default(20),
  cursor: z.string().max(200).optional().meta({ description: 'nextCursor of the previous page' }),
  status: deliveryStatusSchema.optional(),
});
