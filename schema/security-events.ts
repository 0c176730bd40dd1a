import { z } from 'zod';
import { queryInt, timestamp } from './common.ts';
import { instantInput } from './bookings.ts';

/** The closed list of what security monitoring records; each has one place in the code that reports it. */
export const SECURITY_EVENT_KINDS = [
  'sign_in_failed',
  'api_key_invalid',
  'api_key_revoked',
  'outbound_blocked',
  'billing_signature_invalid',
  'honeypot_hit',
  'rate_limited',
] as const;

export type SecurityEventKind = (typeof SECURITY_EVENT_KINDS)[number];

export const securityEventKindSchema = z.enum(SECURITY_EVENT_KINDS).meta({
  description:
    'sign_in_failed: wrong email or password; api_key_invalid: an unknown or malformed svc_ key (a deleted key is unknown); ' +
    'api_key_revoked: a deactivated key; outbound_blocked: the outbound guard refused a non-public address; ' +
    'billing_signature_invalid: a Stripe webhook with a bad signature; honeypot_hit: the contact form’s hidden field was filled in; ' +
    'rate_limited: any 429',
});

/** Short facts about an event: never a secret (a key appears as its first 8 characters at most). */
const securityEventDetailSchema = z.record(z.string(), z.union([z.string(), z.number(), z.boolean(), z.null()]));
export type SecurityEventDetail = z.infer<typeof securityEventDetailSchema>;

/** The longest range one request may ask for (the series is daily beyond a week). */
export const SECURITY_MONITORING_MAX_DAYS = 90;

export const securityMonitoringInput = z.object({
  from: instantInput.meta({ description: 'Start of the range (default: 24 h before `to`); counts are hourly, so it is rounded down to its hour' }).optional(),
  to: instantInput.meta({ description: `End of the range, excluded (default: now); at most ${SECURITY_MONITORING_MAX_DAYS} days after from` }).optional(),
  kind: securityEventKindSchema.optional(),
  limit: queryInt({ min: 1, max: 200 }).default(50).meta({ description: 'How many of the latest events to list' }),
});

const countsByKind = z
  .object(Object.fromEntries(SECURITY_EVENT_KINDS.map((kind) => [kind, z.number().int()])) as Record<SecurityEventKind, z.ZodNumber>)
  .meta({ description: 'Events per kind (0 for kinds left out by the `kind` filter)' });

const securityEventSchema = z.object({
  id: z.string(),
  kind: securityEventKindSchema,
  occurredAt: timestamp,
  ownerId: z.string().nullable(),
  chatInterfaceId: z.string().nullable(),
  ip: z.string().nullable().meta({ description: 'The client address, where the event came from a request' }),
  detail: securityEventDetailSchema,
});

export const securityMonitoringSchema = z.object({
  from: timestamp,
  to: timestamp,
  retentionDays: z.number().int().meta({ description: 'Events and counts older than this are deleted (SECURITY_EVENTS_RETENTION_DAYS)' }),
  total: z.number().int(),
  totals: countsByKind,
  granularity: z.enum(['hour', 'day']).meta({ description: 'Of the series: hour up to 7 days, day (UTC) beyond' }),
  series: z.array(z.object({ start: timestamp, total: z.number().int(), counts: countsByKind })).meta({
    description: 'Every bucket of the range, oldest first, empty ones included',
  }),
  events: z.array(securityEventSchema).meta({
    description: 'The latest events in the range, newest first. Counts are exact; rows are a sample when one instance sees more than 200 in a second',
  }),
});
