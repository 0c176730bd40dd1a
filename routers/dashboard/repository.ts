import { sql, type Kysely, type Transaction } from 'kysely';
import type { DB } from '../../db/types.ts';
import { jsonb } from '../../db/json.ts';
import type { Activity } from './activity.ts';

type Db = Kysely<DB> | Transaction<DB>;

/** Stands for "no interface" in the rollups' keys (an owner-wide figure such as a failed document). */
export const NO_INTERFACE = '00000000-0000-0000-0000-000000000000';

/**
 * The activity as the database function count_activity reads it. Its question is a visitor's text cut to 200
 * characters, which can split an emoji: jsonb would refuse the half left, failing the whole chat turn.
 */
export const activityJson = (activity: Activity) => jsonb(activity);

/** Adds an event to today's rollups, in the caller's transaction when it passes one. */
export async function countActivity(db: Db, ownerId: string, chatInterfaceId: string | null, activity: Activity) {
  await sql`select count_activity(${ownerId}::uuid, ${chatInterfaceId ?? NO_INTERFACE}::uuid, ${activityJson(activity)})`.execute(db);
}

/**
 * Counts a webhook attempt for the endpoint's owner; the endpoint is named by id so the delivery code needs
 * no owner at hand.
 */
export async function countWebhookAttempt(db: Db, webhookId: string, succeeded: boolean) {
  const metrics = JSON.stringify({ metrics: { [succeeded ? 'webhook_delivered' : 'webhook_failed']: 1 } });
  await sql`select count_activity(w.owner_id, ${NO_INTERFACE}::uuid, cast(${metrics}::text as jsonb)) from webhooks w where w.id = ${webhookId}::uuid`.execute(
    db,
  );
}

export interface RangeFilter {
  ownerId: string;
  from: string;
  to: string;
  chatInterfaceId?: string;
}

const interfaceFilter = (f: RangeFilter) => (f.chatInterfaceId ? sql`and chat_interface_id = ${f.chatInterfaceId}::uuid` : sql``);

/** Period start of a day for a grouping: the day itself, its ISO week's Monday, or its month's first day. */
const periodOf = (grouping: 'day' | 'week' | 'month') =>
  grouping === 'day' ? sql`day` : grouping === 'week' ? sql`date_trunc('week', day)::date` : sql`date_trunc('month', day)::date`;

/** Sums of each metric per period over the range (owner-wide rows included unless one interface is asked for). */
export async function metricsByPeriod(db: Db, f: RangeFilter, grouping: 'day' | 'week' | 'month') {
  const { rows } = await sql<{ period: string; metric: string; value: number }>`
    select to_char(${periodOf(grouping)}, 'YYYY-MM-DD') as period, metric, sum(value)::float8 as value
    from activity_daily
    where owner_id = ${f.ownerId}::uuid and day between ${f.from}::date and ${f.to}::date ${interfaceFilter(f)}
    group by 1, 2`.execute(db);
  return rows;
}

/** Sums of each metric per interface over the range (for monitoring). */
export async function metricsByInterface(db: Db, f: RangeFilter) {
  const { rows } = await sql<{ chat_interface_id: string; metric: string; value: number }>`
    select chat_interface_id, metric, sum(value)::float8 as value
    from activity_daily
    where owner_id = ${f.ownerId}::uuid and day between ${f.from}::date and ${f.to}::date ${interfaceFilter(f)}
    group by 1, 2`.execute(db);
  return rows;
}

/** Distinct visitors per period and over the whole range. */
export async function uniqueVisitors(db: Db, f: RangeFilter, grouping: 'day' | 'week' | 'month') {
  const [perPeriod, total] = await Promise.all([
    sql<{ period: string; visitors: number }>`
      select to_char(${periodOf(grouping)}, 'YYYY-MM-DD') as period, count(distinct visitor_key)::float8 as visitors
      from activity_visitors
      where owner_id = ${f.ownerId}::uuid and day between ${f.from}::date and ${f.to}::date ${interfaceFilter(f)}
      group by 1`.execute(db),
    sql<{ visitors: number }>`
      select count(distinct visitor_key)::float8 as visitors
      from activity_visitors
      where owner_id = ${f.ownerId}::uuid and day between ${f.from}::date and ${f.to}::date ${interfaceFilter(f)}`.execute(db),
  ]);
  return { perPeriod: perPeriod.rows, total: total.rows[0]?.visitors ?? 0 };
}

/** The questions most often left without a good source over the range. */
export async function topUnansweredQuestions(db: Db, f: RangeFilter, limit: number) {
  const { rows } = await sql<{ question: string; count: number }>`
    select question, sum(count)::float8 as count
    from activity_questions
    where owner_id = ${f.ownerId}::uuid and day between ${f.from}::date and ${f.to}::date ${interfaceFilter(f)}
    group by question
    order by 2 desc, question
    limit ${limit}`.execute(db);
  return rows;
}

/** The visitor sketches of the range, one per interface and day (merged by the caller). */
export async function visitorSketches(db: Db, f: RangeFilter) {
  const { rows } = await sql<{ day: string; registers: Uint8Array }>`
    select to_char(day, 'YYYY-MM-DD') as day, registers
    from activity_visitor_sketches
    where owner_id = ${f.ownerId}::uuid and day between ${f.from}::date and ${f.to}::date ${interfaceFilter(f)}`.execute(db);
  return rows;
}
