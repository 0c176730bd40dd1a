/**
 * `npm run bench:dashboard`: GET /api/v1/dashboard (and /monitoring) over HTTPS with BENCH_MESSAGES stored messages
 * (default 1,000,000) of one owner over 90 days, against the same figures computed from the raw rows (sessions and
 * messages) in the same run, on the same database.
 *
 * The rows are written straight into the tables (generate_series; the chat API would take hours to write a
 * million messages) and the rollups are built from them by one aggregate, the state the chat turn's own counting
 * leaves (test/http/dashboard.test.ts checks that state against real conversations). Then:
 * - dashboard_p50_ms / p99: the endpoint over HTTPS, sequential requests, the default 30-day range and a 90-day one;
 * - baseline: the same totals, daily series and distinct visitors read from chat_sessions and chat_messages, in process
 *   (no HTTP, so the comparison favours the baseline).
 * stdout: one JSON line per figure. DATABASE_URL runs it on PostgreSQL (a scratch database).
 */
import type { Kysely } from 'kysely';
import { sql } from 'kysely';
import type { DB } from '../../db/types.ts';
import * as kit from './bench-kit.ts';

const log = kit.createLog('dashboard');
const MESSAGES = kit.intEnv('BENCH_MESSAGES', 1_000_000, 10_000, 5_000_000);
const REQUESTS = kit.intEnv('BENCH_REQUESTS', 30, 5, 1_000);
const RAW_RUNS = kit.intEnv('BENCH_RAW_RUNS', 3, 1, 20);
const DAYS = 90;
const PER_SESSION = 10;
const INTERFACES = 4;

async function seed(db: Kysely<DB>, ownerId: string, interfaceIds: string[]) {
  const sessions = Math.ceil(MESSAGES / PER_SESSION);
  const ids = sql.join(interfaceIds.map((id) => sql`${id}::uuid`));
  const started = performance.now();
  // Session i starts (i mod 90) days ago at a spread time of day; its messages follow a second apart.
  await sql`
    insert into chat_sessions (id, chat_interface_id, owner_id, created_at, last_message_at)
    select 'bench-' || g, (array[${ids}])[1 + g % ${INTERFACES}], ${ownerId}::uuid,
           date_trunc('day', now()) - make_interval(days => g % ${DAYS}) + make_interval(secs => (g * 7) % 80000),
           date_trunc('day', now()) - make_interval(days => g % ${DAYS}) + make_interval(secs => (g * 7) % 80000 + ${PER_SESSION})
    from generate_series(0, ${sessions - 1}) g`.execute(db);
  await sql`
    insert into chat_messages (id, session_id, role, content, usage, created_at)
    select gen_random_uuid(), s.id, case when k % 2 = 0 then 'user' else 'assistant' end,
           case when k % 2 = 0 then 'How long do returns take for an order shipped abroad?' else 'Returns are accepted within 30 days of delivery.' end,
           case when k % 2 = 1 then '{"promptTokens": 24, "completionTokens": 11, "totalTokens": 35}'::jsonb end,
           s.created_at + make_interval(secs => k)
    from chat_sessions s cross join generate_series(0, ${PER_SESSION - 1}) k
    where s.owner_id = ${ownerId}::uuid`.execute(db);
  log(`seeded ${sessions} sessions and ${sessions * PER_SESSION} messages in ${Math.round(performance.now() - started)} ms`);

  const rollups = performance.now();
  await sql`
    insert into activity_daily (owner_id, day, chat_interface_id, metric, value)
    select ${ownerId}::uuid, day, chat_interface_id, metric, value from (
      select (s.created_at at time zone 'utc')::date as day, s.chat_interface_id,
             count(*) filter (where m.role = 'user') as messages,
             count(*) filter (where m.role = 'assistant') as replies,
             coalesce(sum((m.usage->>'promptTokens')::bigint), 0) as tokens_in,
             coalesce(sum((m.usage->>'completionTokens')::bigint), 0) as tokens_out,
             count(distinct s.id) as conversations
      from chat_sessions s join chat_messages m on m.session_id = s.id
      where s.owner_id = ${ownerId}::uuid group by 1, 2
    ) per_day
    cross join lateral (values ('messages', messages), ('replies', replies), ('tokens_in', tokens_in), ('tokens_out', tokens_out),
      ('conversations', conversations), ('upstream_calls', replies), ('latency_b20', replies)) as m(metric, value)`.execute(db);
  await sql`
    insert into activity_visitors (owner_id, day, chat_interface_id, visitor_key)
    select ${ownerId}::uuid, (created_at at time zone 'utc')::date, chat_interface_id, 's:' || id from chat_sessions where owner_id = ${ownerId}::uuid`.execute(
    db,
  );
  await sql`
    insert into activity_daily (owner_id, day, chat_interface_id, metric, value)
    select owner_id, day, chat_interface_id, 'visitors', count(*) from activity_visitors where owner_id = ${ownerId}::uuid group by 1, 2, 3`.execute(db);
  // The sketches count_activity would have kept: per interface and day, each register's highest rank (the same
  // hash, register and rank rule as the function in db/migrations/0015_activity_rollups.ts).
  await sql`
    with hashed as (
      select day, chat_interface_id, hashtextextended(visitor_key, 0) as h from activity_visitors where owner_id = ${ownerId}::uuid
    ), ranked as (
      select day, chat_interface_id, (h & 1023)::int as reg,
             max(case when (h >> 10) & 18014398509481983 = 0 then 55
                      else 54 - floor(log(2.0, ((h >> 10) & 18014398509481983)::numeric))::int end) as rnk
      from hashed group by 1, 2, 3
    ), keys as (select distinct day, chat_interface_id from ranked)
    insert into activity_visitor_sketches (owner_id, day, chat_interface_id, registers)
    select ${ownerId}::uuid, k.day, k.chat_interface_id, decode(string_agg(lpad(to_hex(coalesce(r.rnk, 0)), 2, '0'), '' order by g), 'hex')
    from keys k cross join generate_series(0, 1023) g
    left join ranked r on r.day = k.day and r.chat_interface_id = k.chat_interface_id and r.reg = g
    group by k.day, k.chat_interface_id`.execute(db);
  await sql`analyze`.execute(db);
  log(`rollups built in ${Math.round(performance.now() - rollups)} ms`);
}

/** The dashboard's figures from the raw rows: totals, the daily series and distinct visitors over the range. */
async function rawDashboard(db: Kysely<DB>, ownerId: string, from: string, to: string) {
  const range = sql`m.created_at >= (${from}::date)::timestamp at time zone 'utc' and m.created_at < (${to}::date + 1)::timestamp at time zone 'utc'`;
  const [series, visitors] = await Promise.all([
    sql`
      select (m.created_at at time zone 'utc')::date as day,
             count(*) filter (where m.role = 'user') as messages,
             count(*) filter (where m.role = 'assistant') as replies,
             coalesce(sum((m.usage->>'promptTokens')::bigint), 0) as tokens_in,
             coalesce(sum((m.usage->>'completionTokens')::bigint), 0) as tokens_out,
             count(distinct s.id) filter (where s.created_at >= (${from}::date)::timestamp at time zone 'utc') as conversations,
             count(distinct coalesce(s.visitor_id::text, s.id)) as visitors
      from chat_sessions s join chat_messages m on m.session_id = s.id
      where s.owner_id = ${ownerId}::uuid and ${range}
      group by 1 order by 1`.execute(db),
    sql`
      select count(distinct coalesce(s.visitor_id::text, s.id)) as visitors
      from chat_sessions s join chat_messages m on m.session_id = s.id
      where s.owner_id = ${ownerId}::uuid and ${range}`.execute(db),
  ]);
  return { days: series.rows.length, visitors: Number((visitors.rows[0] as { visitors: number }).visitors) };
}

async function main() {
  const service = await kit.startBenchService(log, { RATE_LIMIT_DEFAULT: '100000000' });
  const watchdog = kit.startWatchdog(kit.intEnv('BENCH_TIMEOUT_S', 1_800, 60, 7_200), log, () => service.cleanup());
  try {
    const { app } = service;
    const db = app.deps.database.db;
    const origin = new URL(app.url).origin;
    const token = await kit.signUp(origin);
    const me = await kit.expectStatus(kit.call(origin, 'GET', '/api/v1/auth/me', { token }), 200, 'me');
    const ownerId = me.json.data.owner.id as string;
    const interfaceIds: string[] = [];
    for (let i = 0; i < INTERFACES; i++) {
      const r = await kit.expectStatus(kit.call(origin, 'POST', '/api/v1/chat-interfaces', { token, body: { name: `Bench ${i}` } }), 201, 'interface');
      interfaceIds.push(r.json.data.chatInterface.id);
    }
    await seed(db, ownerId, interfaceIds);

    const today = new Date().toISOString().slice(0, 10);
    const common = { bench: 'dashboard', database: service.databaseKind, messages: MESSAGES, load_avg_1m: kit.loadAverage() };
    for (const days of [30, DAYS]) {
      const from = new Date(Date.now() - (days - 1) * 86_400_000).toISOString().slice(0, 10);
      const path = `/api/v1/dashboard?from=${from}&to=${today}`;
      const check = await kit.expectStatus(kit.call(origin, 'GET', path, { token }), 200, 'dashboard');
      const raw = await rawDashboard(db, ownerId, from, today);
      // The two computations must agree before their times are compared (within the sketch's error when estimated).
      const ourVisitors = check.json.data.totals.uniqueVisitors as number;
      const visitorError = Math.abs(ourVisitors - raw.visitors) / Math.max(1, raw.visitors);
      if (visitorError > (check.json.data.uniqueVisitorsEstimated ? 0.1 : 0)) {
        throw new Error(`rollups and raw rows disagree: ${ourVisitors} vs ${raw.visitors} visitors`);
      }
      const latencies: number[] = [];
      for (let i = 0; i < REQUESTS; i++) {
        const started = performance.now();
        await kit.expectStatus(kit.call(origin, 'GET', path, { token }), 200, 'dashboard');
        latencies.push(performance.now() - started);
      }
      const rawTimes: number[] = [];
      for (let i = 0; i < RAW_RUNS; i++) {
        const started = performance.now();
        await rawDashboard(db, ownerId, from, today);
        rawTimes.push(performance.now() - started);
      }
      const ours = kit.latencySummary(latencies);
      const baseline = kit.latencySummary(rawTimes);
      for (const key of ['p50', 'p99'] as const) {
        kit.emit({
          ...common,
          range_days: days,
          metric: `dashboard_${key}_ms`,
          value: kit.round(ours[key], 2),
          definition: 'GET /api/v1/dashboard over HTTPS (sequential, keep-alive), read from the rollups',
          baseline: 'raw_rows_query',
          baseline_definition: 'the same totals, daily series and distinct visitors from chat_sessions + chat_messages, in process',
          baseline_value: kit.round(baseline[key], 2),
          speedup: kit.round(baseline[key] / ours[key], 1),
          visitors_estimated: check.json.data.uniqueVisitorsEstimated,
          visitors_relative_error: kit.round(visitorError, 4),
        });
      }
    }
    const monitoring: number[] = [];
    for (let i = 0; i < REQUESTS; i++) {
      const started = performance.now();
      await kit.expectStatus(kit.call(origin, 'GET', '/api/v1/monitoring', { token }), 200, 'monitoring');
      monitoring.push(performance.now() - started);
    }
    const health: number[] = [];
    for (let i = 0; i < REQUESTS; i++) {
      const started = performance.now();
      await kit.expectStatus(kit.call(origin, 'GET', '/api/v1/health/hosting'), 200, 'health');
      health.push(performance.now() - started);
    }
    kit.emit({
      ...common,
      range_days: 30,
      metric: 'monitoring_p50_ms',
      value: kit.round(kit.latencySummary(monitoring).p50, 2),
      definition: 'GET /api/v1/monitoring over HTTPS (sequential, keep-alive)',
      baseline: 'health',
      baseline_definition: 'GET /api/v1/health/hosting over the same connection (the floor of a request)',
      baseline_value: kit.round(kit.latencySummary(health).p50, 2),
    });
  } finally {
    clearTimeout(watchdog);
    await service.cleanup();
  }
}

main().catch((error) => {
  log(`failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
  process.exit(1);
});
