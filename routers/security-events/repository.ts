import { sql, type Kysely } from 'kysely';
import type { DB } from '../../db/types.ts';
import { jsonb } from '../../db/json.ts';
import { NIL_UUID } from '../../db/migrations/0016_security_events.ts';
import type { SecurityEventDetail, SecurityEventKind } from '../../schema/security-events.ts';

export interface NewSecurityEvent {
  id: string;
  kind: SecurityEventKind;
  occurred_at: string;
  owner_id: string | null;
  chat_interface_id: string | null;
  ip: string | null;
  detail: SecurityEventDetail;
}

export interface SecurityEventCount {
  hour: string;
  kind: SecurityEventKind;
  owner_id: string | null;
  chat_interface_id: string | null;
  count: number;
}

/**
 * One flush in one statement: the sampled rows and the exact counts. An event that names an interface but no owner
 * (a visitor's) gets the interface's owner here, so per-owner figures include it without a lookup per request.
 * Counts are merged in key order, so two instances flushing at once take their row locks in the same order.
 */
export async function writeSecurityEvents(db: Kysely<DB>, events: NewSecurityEvent[], counts: SecurityEventCount[]) {
  await sql`
    with inserted as (
      insert into security_events (id, kind, occurred_at, owner_id, chat_interface_id, ip, detail)
      select e.id, e.kind, e.occurred_at, coalesce(e.owner_id, ci.owner_id), e.chat_interface_id, e.ip, e.detail
        from jsonb_to_recordset(${jsonb(events)})
             as e(id uuid, kind text, occurred_at timestamptz, owner_id uuid, chat_interface_id uuid, ip text, detail jsonb)
        left join chat_interfaces ci on e.owner_id is null and ci.id = e.chat_interface_id
    )
    insert into security_event_counts (hour, kind, owner_id, chat_interface_id, count)
    select c.hour, c.kind, coalesce(c.owner_id, ci.owner_id, ${NIL_UUID}::uuid), coalesce(c.chat_interface_id, ${NIL_UUID}::uuid), sum(c.count)
      from jsonb_to_recordset(${jsonb(counts)}) as c(hour timestamptz, kind text, owner_id uuid, chat_interface_id uuid, count bigint)
      left join chat_interfaces ci on c.owner_id is null and ci.id = c.chat_interface_id
     group by 1, 2, 3, 4
     order by 1, 2, 3, 4
    on conflict (hour, kind, owner_id, chat_interface_id) do update set count = security_event_counts.count + excluded.count
  `.execute(db);
}

/** Counts per bucket and kind over [from, to), buckets of an hour or a UTC day (date_bin ignores the session's time zone). */
export async function countSeries(db: Kysely<DB>, range: { from: Date; to: Date; kind?: SecurityEventKind; granularity: 'hour' | 'day' }) {
  const bucket = range.granularity === 'hour' ? sql`hour` : sql`date_bin(interval '1 day', hour, timestamptz '2000-01-01 00:00:00+00')`;
  const { rows } = await sql<{ bucket: Date; kind: SecurityEventKind; count: number }>`
    select ${bucket} as bucket, kind, sum(count)::float8 as count
      from security_event_counts
     where hour >= date_bin(interval '1 hour', ${range.from}::timestamptz, timestamptz '2000-01-01 00:00:00+00') and hour < ${range.to}::timestamptz
       ${range.kind ? sql`and kind = ${range.kind}` : sql``}
     group by 1, 2
  `.execute(db);
  return rows;
}

export function latestEvents(db: Kysely<DB>, range: { from: Date; to: Date; kind?: SecurityEventKind; limit: number }) {
  let query = db
    .selectFrom('security_events')
    .selectAll()
    .where('occurred_at', '>=', range.from)
    .where('occurred_at', '<', range.to)
    .orderBy('occurred_at', 'desc')
    .orderBy('id', 'desc')
    .limit(range.limit);
  if (range.kind) query = query.where('kind', '=', range.kind);
  return query.execute();
}

/** Rows deleted per statement, so a large backlog never becomes one long transaction. */
const PRUNE_BATCH = 5_000;
const HOUR_MS = 3_600_000;

/**
 * Deletes events older than `before`, and counts of hours that ended by then. Idempotent: instances running it at
 * once only find less to delete.
 */
export async function pruneSecurityEvents(db: Kysely<DB>, before: Date) {
  let events = 0;
  for (;;) {
    const result = await db
      .deleteFrom('security_events')
      .where('id', 'in', (qb) => qb.selectFrom('security_events').select('id').where('occurred_at', '<', before).limit(PRUNE_BATCH))
      .executeTakeFirst();
    const deleted = Number(result.numDeletedRows);
    events += deleted;
    if (deleted < PRUNE_BATCH) break;
  }
  const counts = await db
    .deleteFrom('security_event_counts')
    .where('hour', '<=', new Date(before.getTime() - HOUR_MS))
    .executeTakeFirst();
  return { events, counts: Number(counts.numDeletedRows) };
}

/** One owner's rate-limit refusals per chat interface over whole UTC days (the monitoring's 429 count). */
export async function refusalsByInterface(db: Kysely<DB>, range: { ownerId: string; from: string; to: string; chatInterfaceId?: string }) {
  const { rows } = await sql<{ chat_interface_id: string; count: number }>`
    select chat_interface_id, sum(count)::float8 as count
    from security_event_counts
    where kind = 'rate_limited' and owner_id = ${range.ownerId}::uuid
      and hour >= (${range.from}::date)::timestamp at time zone 'utc' and hour < (${range.to}::date + 1)::timestamp at time zone 'utc'
      ${range.chatInterfaceId ? sql`and chat_interface_id = ${range.chatInterfaceId}::uuid` : sql``}
    group by 1`.execute(db);
  return rows;
}
