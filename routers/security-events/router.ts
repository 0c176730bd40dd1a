import { AppError } from '../../schema/errors.ts';
import {
  SECURITY_EVENT_KINDS,
  SECURITY_MONITORING_MAX_DAYS,
  securityMonitoringInput,
  securityMonitoringSchema,
  type SecurityEventKind,
} from '../../schema/security-events.ts';
import { adminProcedure, router } from '../trpc.ts';
import { countSeries, latestEvents } from './repository.ts';

const HOUR_MS = 3_600_000;
const DAY_MS = 24 * HOUR_MS;
/** Up to a week the series is hourly (at most 169 points); beyond, daily (at most 91). */
const HOURLY_UP_TO_MS = 7 * DAY_MS;

const zeroCounts = () => Object.fromEntries(SECURITY_EVENT_KINDS.map((kind) => [kind, 0])) as Record<SecurityEventKind, number>;
const invalidRange = (detail: string) => new AppError('VALIDATION_FAILED', 'Invalid request parameters', detail);

export const securityEventsRouter = router({
  monitoring: adminProcedure
    .meta({
      openapi: {
        method: 'GET',
        path: '/api/v1/admin/security-monitoring',
        tags: ['Admin'],
        summary: 'Security events: totals per kind, an hourly (or daily) series and the latest events',
        description:
          'Failed sign-ins, invalid and revoked API keys, refused outbound addresses, bad Stripe signatures, contact-form honeypot hits and rate-limit refusals, ' +
          'recorded as they happen (written every second; counts exact, rows sampled beyond 200 per second and instance).',
        protect: true,
        errorResponses: {
          VALIDATION_FAILED: `Invalid parameters (details name the field), from not before to, or a range over ${SECURITY_MONITORING_MAX_DAYS} days`,
        },
      },
    })
    .input(securityMonitoringInput)
    .output(securityMonitoringSchema)
    .query(async ({ ctx, input }) => {
      const to = input.to ? new Date(input.to) : new Date();
      const from = input.from ? new Date(input.from) : new Date(to.getTime() - DAY_MS);
      if (from >= to) throw invalidRange('from: must be before to');
      if (to.getTime() - from.getTime() > SECURITY_MONITORING_MAX_DAYS * DAY_MS)
        throw invalidRange(`to: at most ${SECURITY_MONITORING_MAX_DAYS} days after from`);
      const granularity = to.getTime() - from.getTime() > HOURLY_UP_TO_MS ? 'day' : 'hour';
      const db = ctx.deps.database.db;
      const [rows, events] = await Promise.all([
        countSeries(db, { from, to, kind: input.kind, granularity }),
        latestEvents(db, { from, to, kind: input.kind, limit: input.limit }),
      ]);

      // Every bucket of the range, so a chart needs no gap filling; UTC days, like the query's.
      const step = granularity === 'hour' ? HOUR_MS : DAY_MS;
      const buckets = new Map<number, { start: string; total: number; counts: Record<SecurityEventKind, number> }>();
      for (let start = Math.floor(from.getTime() / step) * step; start < to.getTime(); start += step) {
        buckets.set(start, { start: new Date(start).toISOString(), total: 0, counts: zeroCounts() });
      }
      const totals = zeroCounts();
      let total = 0;
      for (const row of rows) {
        const count = Number(row.count);
        const bucket = buckets.get(new Date(row.bucket).getTime());
        if (bucket) {
          bucket.counts[row.kind] += count;
          bucket.total += count;
        }
        totals[row.kind] += count;
        total += count;
      }
      return {
        from: from.toISOString(),
        to: to.toISOString(),
        retentionDays: ctx.deps.securityEvents.retentionDays,
        total,
        totals,
        granularity,
        series: [...buckets.values()],
        events: events.map((e) => ({
          id: e.id,
          kind: e.kind as SecurityEventKind,
          occurredAt: new Date(e.occurred_at).toISOString(),
          ownerId: e.owner_id,
          chatInterfaceId: e.chat_interface_id,
          ip: e.ip,
          detail: e.detail,
        })),
      };
    }),
});
