import { z } from 'zod';
import { idParam, timestamp } from './common.ts';
import { subscriptionSchema } from './billing.ts';

/**
 * The counters the rollups keep per owner, UTC day and interface (closed list: what the chat turn, leads,
 * bookings, knowledge-base queries, ingestion and webhook deliveries count as they happen).
 */
export const ACTIVITY_METRICS = [
  'conversations',
  'messages',
  'replies',
  'tokens_in',
  'tokens_out',
  'kb_queries',
  'unanswered',
  'leads',
  'bookings',
  'upstream_calls',
  'upstream_error_connection',
  'upstream_error_timeout',
  'upstream_error_invalid_response',
  'upstream_error_auth',
  'upstream_error_http',
  'document_failures',
  'webhook_delivered',
  'webhook_failed',
] as const;
export type ActivityMetric = (typeof ACTIVITY_METRICS)[number];

export const UPSTREAM_ERROR_KINDS = ['connection', 'timeout', 'invalid_response', 'auth', 'http'] as const;
export type UpstreamErrorKind = (typeof UPSTREAM_ERROR_KINDS)[number];

export const GROUPINGS = ['day', 'week', 'month'] as const;

/** The longest range one request may ask for (a year and a day: a leap year plus the boundary). */
export const MAX_RANGE_DAYS = 367;

const dayOrInstant = z
  .string()
  .max(40)
  .regex(/^\d{4}-\d{2}-\d{2}(T[0-9:.]+(Z|[+-]\d{2}:\d{2}))?$/, 'must be a date (YYYY-MM-DD) or an ISO 8601 instant')
  .meta({ example: '2026-11-01' });

export const reportRangeInput = z.object({
  from: dayOrInstant.optional().meta({ description: 'First day (UTC) included; an instant counts as its UTC day. Default: 29 days before `to`' }),
  to: dayOrInstant.optional().meta({ description: 'Last day (UTC) included. Default: today' }),
  chatInterfaceId: idParam.optional().meta({ description: 'Only this chat interface (404 when it is not yours)' }),
});

export const dashboardInput = reportRangeInput.extend({
  groupBy: z.enum(GROUPINGS).default('day').meta({ description: 'Length of each point of the series (weeks start on Monday)' }),
});

const count = z.number().int().min(0);

const rangeSchema = z.object({
  from: z.string().meta({ format: 'date' }),
  to: z.string().meta({ format: 'date' }),
  timeZone: z.literal('UTC'),
});

const figures = {
  conversations: count.meta({ description: 'Conversations started' }),
  messages: count.meta({ description: 'Visitor messages answered' }),
  replies: count.meta({ description: 'Replies sent (the answers)' }),
  tokensIn: count.meta({ description: 'Prompt tokens of those answers' }),
  tokensOut: count.meta({ description: 'Completion tokens of those answers' }),
  knowledgeBaseQueries: count.meta({ description: 'Questions answered from a knowledge base (chat turns and direct queries)' }),
  unanswered: count.meta({ description: 'Of those, answers with no good source: no passage matched the words of the question' }),
  leads: count.meta({ description: 'Leads captured' }),
  bookings: count.meta({ description: 'Bookings made' }),
};

export const dashboardSchema = z
  .object({
    range: rangeSchema.extend({ groupBy: z.enum(GROUPINGS) }),
    chatInterfaceId: z.string().nullable(),
    totals: z.object({
      ...figures,
      uniqueVisitors: count.meta({ description: 'Distinct visitors (a visitor token, or a session for API-key chats) over the whole range' }),
    }),
    series: z.array(
      z.object({
        period: z.string().meta({ format: 'date', description: 'First day of the period' }),
        ...figures,
        uniqueVisitors: count.meta({ description: 'Distinct visitors within the period' }),
      }),
    ),
    uniqueVisitorsEstimated: z.boolean().meta({
      description:
        'Whether the distinct-visitor figures of weeks, months and the whole range are HyperLogLog estimates (about 3% error): they are counted exactly while the range holds at most DASHBOARD_EXACT_VISITOR_DAYS (default 20,000) visitor-days; a day’s figure is always exact',
    }),
    topUnansweredQuestions: z
      .array(z.object({ question: z.string(), count }))
      .meta({ description: 'The questions most often left without a good source (normalised: trimmed, lower case, at most 200 characters); at most 10' }),
    documents: z
      .object({ processing: count, completed: count, failed: count, total: count })
      .meta({ description: 'Documents by status now (of the interface’s knowledge base when chatInterfaceId is given)' }),
    usage: subscriptionSchema.shape.usage.extend({ plan: subscriptionSchema.shape.plan, limits: subscriptionSchema.shape.limits }),
    generatedAt: timestamp,
  })
  .meta({ id: 'Dashboard' });

const latency = z.number().min(0).nullable();

export const monitoringSchema = z
  .object({
    range: rangeSchema,
    interfaces: z.array(
      z.object({
        chatInterfaceId: z.string(),
        name: z.string(),
        backend: z.enum(['endpoint', 'knowledge_base', 'none']),
        calls: count.meta({ description: 'Calls to the interface’s backend (its external endpoint or its knowledge base) in the range' }),
        latencyP50Ms: latency.meta({ description: 'Median time of those calls (from a log-scale histogram: within 12%); null without calls' }),
        latencyP95Ms: latency,
        errorRate: z.number().min(0).max(1).nullable().meta({ description: 'Failed calls / calls; null without calls' }),
        errors: z.object(Object.fromEntries(UPSTREAM_ERROR_KINDS.map((k) => [k, count])) as Record<UpstreamErrorKind, typeof count>).meta({
          description:
            'Failed calls by kind: connection (refused, unreachable, blocked address), timeout, invalid_response, auth (401/403), http (any other error status)',
        }),
        rateLimited: count.meta({ description: 'Requests to this interface refused with 429' }),
      }),
    ),
    documents: z.object({ failed: count.meta({ description: 'Documents whose processing failed in the range' }) }),
    webhooks: z.object({
      delivered: count.meta({ description: 'Delivery attempts that succeeded in the range' }),
      failed: count.meta({ description: 'Delivery attempts that failed in the range' }),
      successRate: z.number().min(0).max(1).nullable(),
    }),
    backlog: z
      .object({
        documentsProcessing: count.meta({ description: 'Your documents waiting for or in processing now' }),
        oldestDocumentSeconds: z.number().min(0).nullable().meta({ description: 'How long the oldest of them has waited' }),
        webhookDeliveriesPending: count.meta({ description: 'Your webhook deliveries not delivered yet (waiting for a first attempt or a retry)' }),
        oldestDeliverySeconds: z.number().min(0).nullable(),
      })
      .meta({ description: 'Your background work now' }),
    generatedAt: timestamp,
  })
  .meta({ id: 'Monitoring' });
