import { AppError } from '../../schema/errors.ts';
import { dashboardInput, dashboardSchema, monitoringSchema, reportRangeInput, UPSTREAM_ERROR_KINDS } from '../../schema/dashboard.ts';
import { PLAN_RULES } from '../../schema/plans.ts';
import { type ErrorResponses, ownerProcedure, router } from '../trpc.ts';
import type { Context } from '../context.ts';
import { findOwnedInterface, listOwnedInterfaces } from '../chat-interfaces/repository.ts';
import { documentsByStatus } from '../knowledge-base/repository.ts';
import { ownerDeliveryBacklog } from '../webhooks/repository.ts';
import { monthUsage } from '../billing/usage.ts';
import { refusalsByInterface } from '../security-events/repository.ts';
import { bucketOfMetric, LATENCY_BUCKETS, quantileOf } from './activity.ts';
import { periodStartOf, periodsOf, resolveRange } from './range.ts';
import { estimateDistinct, mergeSketch, SKETCH_REGISTERS } from './visitor-sketch.ts';
import * as repo from './repository.ts';

const tags = ['Dashboard'];
const TOP_QUESTIONS = 10;

const rangeErrors = {
  VALIDATION_FAILED: 'from or to is not a date or instant, from is after to, or the range covers more than 367 days',
  NOT_FOUND: 'chatInterfaceId names none of your chat interfaces',
} satisfies ErrorResponses;

/** The interface a report is narrowed to, when one is asked for: another owner's is as unknown as a missing one. */
async function narrowedInterface(ctx: Context & { owner: { id: string } }, id: string | undefined) {
  if (id === undefined) return undefined;
  const iface = await findOwnedInterface(ctx.deps.database.db, ctx.owner.id, id);
  if (!iface) throw new AppError('NOT_FOUND', 'Chat interface not found');
  return iface;
}

/** The figures of a dashboard point, from the summed metrics of its rows. */
function figuresOf(sums: Map<string, number>) {
  const get = (metric: string) => sums.get(metric) ?? 0;
  return {
    conversations: get('conversations'),
    messages: get('messages'),
    replies: get('replies'),
    tokensIn: get('tokens_in'),
    tokensOut: get('tokens_out'),
    knowledgeBaseQueries: get('kb_queries'),
    unanswered: get('unanswered'),
    leads: get('leads'),
    bookings: get('bookings'),
  };
}

const groupSums = <K extends string>(rows: Array<{ metric: string; value: number }>, keyOf: (row: never) => K) => {
  const groups = new Map<K, Map<string, number>>();
  for (const row of rows) {
    const key = keyOf(row as never);
    const sums = groups.get(key) ?? new Map<string, number>();
    sums.set(row.metric, (sums.get(row.metric) ?? 0) + Number(row.value));
    groups.set(key, sums);
  }
  return groups;
};

/** Distinct visitors per period and over the range: counted while that is cheap, estimated from the sketches beyond. */
async function distinctVisitors(
  deps: Pick<Context['deps'], 'database' | 'config'>,
  filter: repo.RangeFilter,
  grouping: 'day' | 'week' | 'month',
  visitorDays: number,
) {
  const db = deps.database.db;
  // Counting exactly scans one row per visitor-day (DASHBOARD_EXACT_VISITOR_DAYS bounds that work).
  if (visitorDays <= deps.config.DASHBOARD_EXACT_VISITOR_DAYS) {
    const exact = await repo.uniqueVisitors(db, filter, grouping);
    return { total: Number(exact.total), perPeriod: new Map(exact.perPeriod.map((v) => [v.period, Number(v.visitors)])), estimated: false };
  }
  const total = new Uint8Array(SKETCH_REGISTERS);
  const periods = new Map<string, Uint8Array>();
  for (const row of await repo.visitorSketches(db, filter)) {
    const registers = new Uint8Array(row.registers);
    mergeSketch(total, registers);
    const period = periodStartOf(row.day, grouping);
    const sketch = periods.get(period) ?? new Uint8Array(SKETCH_REGISTERS);
    mergeSketch(sketch, registers);
    periods.set(period, sketch);
  }
  const perPeriod = new Map([...periods].map(([period, sketch]) => [period, estimateDistinct(sketch)]));
  return { total: estimateDistinct(total), perPeriod, estimated: true };
}

export const dashboardRouter = router({
  dashboard: ownerProcedure
    .meta({
      openapi: {
        method: 'GET',
        path: '/api/v1/dashboard',
        tags,
        summary: 'How your interfaces are used: totals and a series of conversations, messages, visitors, tokens, knowledge-base gaps, leads, bookings',
        description:
          'Read from rollups kept as traffic flows (days in UTC). Without chatInterfaceId the figures cover all your interfaces and your direct ' +
          'knowledge-base queries; with it, that interface only.',
        protect: true,
        errorResponses: rangeErrors,
      },
    })
    .input(dashboardInput)
    .output(dashboardSchema)
    .query(async ({ ctx, input }) => {
      const db = ctx.deps.database.db;
      const now = new Date();
      const range = resolveRange(input, now);
      const iface = await narrowedInterface(ctx, input.chatInterfaceId);
      const filter = { ownerId: ctx.owner.id, ...range, ...(iface ? { chatInterfaceId: iface.id } : {}) };
      const [rows, questions, documents, usage] = await Promise.all([
        repo.metricsByPeriod(db, filter, input.groupBy),
        repo.topUnansweredQuestions(db, filter, TOP_QUESTIONS),
        iface && !iface.config_id ? Promise.resolve([]) : documentsByStatus(db, ctx.owner.id, iface?.config_id ?? undefined),
        monthUsage(db, ctx.owner.id, now),
      ]);
      const byPeriod = groupSums(rows, (row: { period: string }) => row.period);
      const visitorDays = rows.reduce((n, row) => (row.metric === 'visitors' ? n + Number(row.value) : n), 0);
      const visitors = await distinctVisitors(ctx.deps, filter, input.groupBy, visitorDays);
      const all = new Map<string, number>();
      for (const sums of byPeriod.values()) for (const [metric, value] of sums) all.set(metric, (all.get(metric) ?? 0) + value);
      const docs = { processing: 0, completed: 0, failed: 0, total: 0 };
      for (const row of documents) {
        docs[row.status] = Number(row.n);
        docs.total += Number(row.n);
      }
      return {
        range: { ...range, timeZone: 'UTC' as const, groupBy: input.groupBy },
        chatInterfaceId: iface?.id ?? null,
        totals: { ...figuresOf(all), uniqueVisitors: visitors.total },
        series: periodsOf(range, input.groupBy).map((period) => ({
          period,
          ...figuresOf(byPeriod.get(period) ?? new Map()),
          // A day's distinct visitors are counted exactly as they come (a visitor key belongs to one interface).
          uniqueVisitors: input.groupBy === 'day' ? (byPeriod.get(period)?.get('visitors') ?? 0) : (visitors.perPeriod.get(period) ?? 0),
        })),
        uniqueVisitorsEstimated: visitors.estimated,
        topUnansweredQuestions: questions.map((q) => ({ question: q.question, count: Number(q.count) })),
        documents: docs,
        usage: { ...usage, plan: ctx.owner.plan, limits: PLAN_RULES[ctx.owner.plan] },
        generatedAt: now.toISOString(),
      };
    }),

  monitoring: ownerProcedure
    .meta({
      openapi: {
        method: 'GET',
        path: '/api/v1/monitoring',
        tags,
        summary: 'Whether your upstreams are healthy: per interface latency p50/p95, errors by kind, 429s; failed documents, webhook success, backlog',
        description: 'Read from rollups kept as traffic flows (days in UTC); the backlog is now.',
        protect: true,
        errorResponses: rangeErrors,
      },
    })
    .input(reportRangeInput)
    .output(monitoringSchema)
    .query(async ({ ctx, input }) => {
      const db = ctx.deps.database.db;
      const now = new Date();
      const range = resolveRange(input, now);
      const iface = await narrowedInterface(ctx, input.chatInterfaceId);
      const filter = { ownerId: ctx.owner.id, ...range, ...(iface ? { chatInterfaceId: iface.id } : {}) };
      const [interfaces, rows, ownerWide, refusals, documents, deliveries] = await Promise.all([
        iface ? Promise.resolve([iface]) : listOwnedInterfaces(db, ctx.owner.id),
        repo.metricsByInterface(db, filter),
        repo.metricsByInterface(db, { ...filter, chatInterfaceId: repo.NO_INTERFACE }),
        refusalsByInterface(db, filter),
        documentsByStatus(db, ctx.owner.id),
        ownerDeliveryBacklog(db, ctx.owner.id),
      ]);
      const byInterface = groupSums(rows, (row: { chat_interface_id: string }) => row.chat_interface_id);
      const refused = new Map(refusals.map((r) => [r.chat_interface_id, Number(r.count)]));
      const owner = groupSums(ownerWide, () => 'owner').get('owner') ?? new Map<string, number>();
      const processing = documents.find((d) => d.status === 'processing');
      const delivered = owner.get('webhook_delivered') ?? 0;
      const failedDeliveries = owner.get('webhook_failed') ?? 0;
      return {
        range: { ...range, timeZone: 'UTC' as const },
        interfaces: interfaces.map((i) => {
          const sums = byInterface.get(i.id) ?? new Map<string, number>();
          const calls = sums.get('upstream_calls') ?? 0;
          const histogram = new Array<number>(LATENCY_BUCKETS).fill(0);
          for (const [metric, value] of sums) {
            const bucket = bucketOfMetric(metric);
            if (bucket !== undefined) histogram[bucket] = value;
          }
          const errors = Object.fromEntries(UPSTREAM_ERROR_KINDS.map((kind) => [kind, sums.get(`upstream_error_${kind}`) ?? 0])) as Record<
            (typeof UPSTREAM_ERROR_KINDS)[number],
            number
          >;
          const failed = Object.values(errors).reduce((a, b) => a + b, 0);
          return {
            chatInterfaceId: i.id,
            name: i.name,
            backend: i.endpoint_url ? ('endpoint' as const) : i.config_id ? ('knowledge_base' as const) : ('none' as const),
            calls,
            latencyP50Ms: quantileOf(histogram, 0.5),
            latencyP95Ms: quantileOf(histogram, 0.95),
            errorRate: calls === 0 ? null : Math.round((failed / calls) * 10_000) / 10_000,
            errors,
            rateLimited: refused.get(i.id) ?? 0,
          };
        }),
        documents: { failed: owner.get('document_failures') ?? 0 },
        webhooks: {
          delivered,
          failed: failedDeliveries,
          successRate: delivered + failedDeliveries === 0 ? null : Math.round((delivered / (delivered + failedDeliveries)) * 10_000) / 10_000,
        },
        backlog: {
          documentsProcessing: Number(processing?.n ?? 0),
          oldestDocumentSeconds: processing?.oldest_seconds == null ? null : Math.round(Number(processing.oldest_seconds)),
          webhookDeliveriesPending: deliveries.pending,
          oldestDeliverySeconds: deliveries.oldest_seconds === null ? null : Math.round(deliveries.oldest_seconds),
        },
        generatedAt: now.toISOString(),
      };
    }),
});
