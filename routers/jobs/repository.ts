import { sql, type Kysely, type RawBuilder, type Transaction } from 'kysely';
import type { DB } from '../../db/types.ts';

/**
 * The SQL of the job queue (queue.ts claims the jobs, runner.ts runs them). A claim is identified by (locked_by,
 * attempts): every write for a claim is conditional on both, so a worker that lost its lease never overwrites its
 * successor's state.
 * Times that matter (run_at, lease_until) come from the database clock, never the process's.
 */

type Executor = Kysely<DB> | Transaction<DB>;

export interface ClaimedRow {
  id: string;
  kind: string;
  payload: unknown;
  attempts: number;
  max_attempts: number;
  run_at: Date | string;
}

/** One claim of a job by a worker. */
export interface Claim {
  id: string;
  attempts: number;
  workerId: string;
}

const millis = (ms: number): RawBuilder<unknown> => sql`(${ms}::float8 * interval '1 millisecond')`;

/** A ready job: queued and due, or running on a lease that ran out (its worker died). */
const READY = sql`((status = 'queued' and run_at <= now()) or (status = 'running' and lease_until < now()))`;

const kindFilterOf = (kinds?: string[]) => (!kinds ? sql`` : kinds.length > 0 ? sql`and kind in (${sql.join(kinds)})` : sql`and false`);

/**
 * Candidates read per job claimed: the claim takes the first `limit` of them not locked already, so an instance
 * claiming at the same moment as two others still finds jobs.
 */
const CANDIDATES_PER_CLAIM = 3;

/**
 * The jobs a fair claim may take: of each fair key, its oldest due jobs, as many as its running jobs (on every
 * instance, counting those whose lease ran out: they will run again) leave under `perKeyLimit`; ranked so that the
 * keys with the fewest running go first (a key's n-th job counts as running + n), then the oldest. So one tenant's
 * backlog, or an endpoint that answers only at its deadline, holds at most `perKeyLimit` workers, and another
 * key's job waits for the next free worker, not behind the backlog. Keys are per queue (`webhook:<owner>`,
 * `document:<owner>`): a key's jobs are read in key order, so another queue's jobs under the same key would be
 * read through and counted as running.
 * A job without a key comes first, and with `withExpired` so does one whose lease ran out (its worker died): those
 * are rare, and claims are on every delivery's path (on PGlite, this part and the keyless one were a third of the
 * claim's time).
 * Cost: a loose scan of jobs_fair_ready_idx over the queue's key range (one probe per key with queued jobs; with a
 * filter on the kind instead, the planner read and sorted the whole backlog), per key a count of its running jobs
 * (jobs_fair_running_idx) and at most `perKeyLimit` (and no more than the claim can use) of its due jobs, and the
 * jobs without a key (jobs_unkeyed_ready_idx) or with an expired lease (jobs_lease_idx): no backlog is read.
 */
const fairCandidates = (limit: number, fair: FairClaim, kinds: string[] | undefined) => {
  const { perKeyLimit, withExpired, keyPrefix } = fair;
  const kindFilter = kindFilterOf(kinds);
  // The queue's own keys: [prefix, prefix with its last character's successor), in the column's byte order.
  const keyRange = keyPrefix
    ? sql`and fair_key >= ${keyPrefix} and fair_key < ${keyPrefix.slice(0, -1) + String.fromCharCode(keyPrefix.charCodeAt(keyPrefix.length - 1) + 1)}`
    : sql``;
  return sql`
  with recursive fair_keys(k) as (
      (select fair_key from jobs where status = 'queued' and fair_key is not null ${keyRange} order by fair_key limit 1)
    union all
      select (select fair_key from jobs where status = 'queued' and fair_key > fk.k ${keyRange} order by fair_key limit 1)
        from fair_keys fk where fk.k is not null
  ),
  candidates as (
      select c.id, c.run_at, r.n + c.rn as share
        from fair_keys fk
        cross join lateral (select count(*)::int as n from jobs where status = 'running' and fair_key = fk.k ${kindFilter}) r
        cross join lateral (
          select id, run_at, row_number() over (order by run_at) as rn from jobs
           where status = 'queued' and fair_key = fk.k and run_at <= now() ${kindFilter}
           order by fair_key, run_at limit least(${limit * CANDIDATES_PER_CLAIM}::int, greatest(0, ${perKeyLimit}::int - r.n))) c
       where fk.k is not null
    union all
      ${unkeyedReady(limit, kinds)}
    ${
      withExpired
        ? sql`union all
      ${expiredOfKinds(limit, kinds)}`
        : sql``
    }
  )
  select id as candidate_id, row_number() over (order by share, run_at) as rank from candidates
   order by share, run_at limit ${limit * CANDIDATES_PER_CLAIM}::int`;
};

/**
 * The oldest due jobs without a fair key (none, normally: a job enqueued without one), read kind by kind from
 * jobs_unkeyed_ready_idx: given the kinds as a list, the planner reads the whole table (every other queue's backlog).
 */
const unkeyedReady = (limit: number, kinds: string[] | undefined) =>
  kinds
    ? sql`(select u.id, u.run_at, 0 as share from unnest(cast(${kinds} as text[])) as k(kind) cross join lateral (
             select id, run_at from jobs where status = 'queued' and fair_key is null and kind = k.kind and run_at <= now()
              order by kind, run_at limit ${limit}::int) u)`
    : sql`(select id, run_at, 0 as share from jobs where status = 'queued' and fair_key is null and run_at <= now() order by run_at limit ${limit}::int)`;

/** The jobs of `kinds` whose lease ran out (their worker died), from jobs_lease_idx. */
const expiredOfKinds = (limit: number, kinds: string[] | undefined) =>
  sql`(select id, run_at, 0 as share from jobs where status = 'running' and lease_until < now() ${kindFilterOf(kinds)}
        order by lease_until limit ${limit}::int)`;

/** How a queue claims fairly among fair keys (see fairCandidates). */
export interface FairClaim {
  perKeyLimit: number;
  /** Also claim jobs whose lease ran out. */
  withExpired: boolean;
  /** The queue's keys all start with this (`webhook:`): the walk over keys reads no other queue's. */
  keyPrefix?: string;
}

/** One short statement: claims up to `limit` ready jobs, oldest run_at first; with `fair`, fairly across fair keys. */
export async function claimJobs(db: Kysely<DB>, workerId: string, limit: number, leaseMs: number, kinds?: string[], fair?: FairClaim): Promise<ClaimedRow[]> {
  const picked = !fair
    ? sql`select id from jobs where ${READY} ${kindFilterOf(kinds)} order by run_at limit ${limit} for update skip locked`
    : // The candidates are read without locks; here the rows are locked and checked to be still ready, and only then
      // cut to the limit, so an instance claiming at the same moment as another takes the next ones, not nothing.
      // Each candidate is fetched by its key: the readiness check is a CASE, which no index answers, because given
      // READY the planner read every ready job (the whole backlog, on every claim) to join them.
      sql`select j.id from (${fairCandidates(limit, fair, kinds)}) c join jobs j on j.id = c.candidate_id
           where case when j.status = 'queued' then j.run_at <= now() when j.status = 'running' then j.lease_until < now() else false end
           order by c.rank limit ${limit} for update of j skip locked`;
  const { rows } = await sql<ClaimedRow>`
      update jobs
         set status = 'running', locked_by = ${workerId}, lease_until = now() + ${millis(leaseMs)},
             attempts = attempts + 1, updated_at = now()
       where id in (${picked})
      returning id, kind, payload, attempts, max_attempts, run_at`.execute(db);
  return rows.sort((a, b) => new Date(a.run_at).getTime() - new Date(b.run_at).getTime());
}

/** The WHERE that identifies one claim: ours, still running, and the same attempt we claimed. */
const ours = (claim: Claim) => sql`id = ${claim.id} and locked_by = ${claim.workerId} and status = 'running' and attempts = ${claim.attempts}`;

// Each write below answers whether the claim was still ours.

export async function extendLease(db: Kysely<DB>, claim: Claim, leaseMs: number): Promise<boolean> {
  const { rows } = await sql`
      update jobs set lease_until = now() + ${millis(leaseMs)}, updated_at = now()
       where ${ours(claim)} returning id`.execute(db);
  return rows.length > 0;
}

export async function markDone(db: Kysely<DB>, claim: Claim): Promise<boolean> {
  const { rows } = await sql`
      update jobs set status = 'done', locked_by = null, lease_until = null, updated_at = now()
       where ${ours(claim)} returning id`.execute(db);
  return rows.length > 0;
}

export async function markDead(db: Kysely<DB>, claim: Claim, error: string): Promise<boolean> {
  const { rows } = await sql`
      update jobs set status = 'dead', last_error = ${error}, locked_by = null, lease_until = null, updated_at = now()
       where ${ours(claim)} returning id`.execute(db);
  return rows.length > 0;
}

export async function markRetry(db: Kysely<DB>, claim: Claim, error: string, delayMs: number): Promise<boolean> {
  const { rows } = await sql`
      update jobs set status = 'queued', last_error = ${error}, run_at = now() + ${millis(delayMs)},
             locked_by = null, lease_until = null, updated_at = now()
       where ${ours(claim)} returning id`.execute(db);
  return rows.length > 0;
}

export async function markRescheduled(db: Kysely<DB>, claim: Claim, note: string, runAt: Date): Promise<boolean> {
  const { rows } = await sql`
      update jobs set status = 'queued', attempts = attempts - 1, last_error = ${note}, run_at = ${runAt},
             locked_by = null, lease_until = null, updated_at = now()
       where ${ours(claim)} returning id`.execute(db);
  return rows.length > 0;
}

/** Gives a claimed job back without counting the attempt. */
export async function releaseClaim(db: Kysely<DB>, claim: Claim): Promise<boolean> {
  const { rows } = await sql`
      update jobs set status = 'queued', attempts = attempts - 1, locked_by = null, lease_until = null, updated_at = now()
       where ${ours(claim)} returning id`.execute(db);
  return rows.length > 0;
}

/** The WHERE that identifies several claims of one worker (a batch): ids with the attempts we claimed them at. */
const oursAll = (claims: Claim[]) => sql`locked_by = ${claims[0]!.workerId} and status = 'running'
       and (id, attempts) in (select * from unnest(cast(${claims.map((c) => c.id)} as uuid[]), cast(${claims.map((c) => c.attempts)} as int[])))`;

/** One statement for a batch; answers the ids still ours. */
export async function extendLeases(db: Kysely<DB>, claims: Claim[], leaseMs: number): Promise<Set<string>> {
  if (claims.length === 0) return new Set();
  const { rows } = await sql<{ id: string }>`
      update jobs set lease_until = now() + ${millis(leaseMs)}, updated_at = now()
       where ${oursAll(claims)} returning id`.execute(db);
  return new Set(rows.map((r) => r.id));
}

/** One statement for a batch; answers the ids that were still ours. */
export async function markAllDone(db: Kysely<DB>, claims: Claim[]): Promise<Set<string>> {
  if (claims.length === 0) return new Set();
  const { rows } = await sql<{ id: string }>`
      update jobs set status = 'done', locked_by = null, lease_until = null, updated_at = now()
       where ${oursAll(claims)} returning id`.execute(db);
  return new Set(rows.map((r) => r.id));
}

/** Returns how many finished jobs older than a day were deleted. */
export async function deleteOldDoneJobs(db: Kysely<DB>): Promise<number> {
  const result = await sql`delete from jobs where status = 'done' and updated_at < now() - interval '24 hours'`.execute(db);
  return Number(result.numAffectedRows ?? 0);
}

export interface NewJob {
  id: string;
  kind: string;
  /** Already JSON. */
  payload: string;
  runAt?: Date;
  maxAttempts?: number;
  dedupeKey: string | null;
  /** Who the job is for, when a queue claims fairly (claimJobs' `fair`), in that queue's key space (`webhook:<owner>`). */
  fairKey?: string | null;
}

const jobValues = (job: NewJob) => ({
  id: job.id,
  kind: job.kind,
  payload: sql`cast(${job.payload}::text as jsonb)`,
  ...(job.runAt ? { run_at: job.runAt } : {}),
  ...(job.maxAttempts !== undefined ? { max_attempts: job.maxAttempts } : {}),
  dedupe_key: job.dedupeKey,
  fair_key: job.fairKey ?? null,
});

export async function insertJob(db: Executor, job: NewJob): Promise<void> {
  await db.insertInto('jobs').values(jobValues(job)).execute();
}

/**
 * Inserts unless a queued or running job has the same dedupe key; returns the new id, or undefined on a conflict.
 * The partial unique index jobs_dedupe_idx arbitrates; its predicate is spelt out literally so the planner can
 * match it (a parameterised predicate would not prove the implication).
 */
export async function insertDedupedJob(db: Executor, job: NewJob): Promise<string | undefined> {
  const inserted = await db
    .insertInto('jobs')
    .values(jobValues(job))
    .onConflict((oc) => oc.column('dedupe_key').where(sql<boolean>`dedupe_key is not null and status in ('queued', 'running')`).doNothing())
    .returning('id')
    .executeTakeFirst();
  return inserted?.id;
}

/**
 * The inserts of `jobs` for another area's single statement that writes rows and the jobs that finish them: the job
 * at position i is inserted only when that statement's CTE `source` returned the row whose id is `forIds[i]`, so
 * the rows and their jobs are one statement, atomic without a transaction. No ON CONFLICT: a dedupe key that is
 * already taken fails the whole statement rather than leave a row without its job. The jobs are as queue.ts's
 * enqueue would insert them with default attempts and run time: keep the two in step.
 */
export const jobInsertsFor = (source: string, forIds: string[], jobs: Array<Pick<NewJob, 'id' | 'kind' | 'payload' | 'dedupeKey' | 'fairKey'>>) =>
  sql`insert into jobs (id, kind, payload, dedupe_key, fair_key)
      select j.id, j.kind, cast(j.payload as jsonb), j.dedupe_key, j.fair_key
        from unnest(cast(${forIds} as uuid[]), cast(${jobs.map((j) => j.id)} as uuid[]), cast(${jobs.map((j) => j.kind)} as text[]),
                    cast(${jobs.map((j) => j.payload)} as text[]), cast(${jobs.map((j) => j.dedupeKey)} as text[]),
                    cast(${jobs.map((j) => j.fairKey ?? null)} as text[])) as j(for_id, id, kind, payload, dedupe_key, fair_key)
        join ${sql.table(source)} s on s.id = j.for_id`;

export async function findActiveJobId(db: Executor, dedupeKey: string): Promise<string | undefined> {
  const existing = await db.selectFrom('jobs').select('id').where('dedupe_key', '=', dedupeKey).where('status', 'in', ['queued', 'running']).executeTakeFirst();
  return existing?.id;
}

/** Deletes the queued and running jobs whose payload field `field` is one of `values`. */
export async function deleteActiveJobsByPayload(db: Executor, field: string, values: string[]): Promise<void> {
  await db.deleteFrom('jobs').where('status', 'in', ['queued', 'running']).where(sql<string>`payload->>${field}`, 'in', values).execute();
}

/**
 * How a job of `j` (the alias another area's sweep gives the jobs table) names that area's row: its payload field
 * `field` equals `rowId`. For sweeps that must stay one statement; the payload's shape is known only here.
 */
export const jobPayloadNames = (field: string, rowId: RawBuilder<unknown>) => sql`j.payload->>${sql.lit(field)} = ${rowId}`;

/** Counts of the active and dead jobs; with `scope`, only those whose payload field names one of its values. */
export async function jobStats(db: Kysely<DB>, scope?: { field: string; values: string[] }) {
  const { rows } = await sql<{ queued: number; running: number; dead: number; oldest: number | null }>`
        select count(*) filter (where status = 'queued')::int as queued,
               count(*) filter (where status = 'running')::int as running,
               count(*) filter (where status = 'dead')::int as dead,
               extract(epoch from now() - min(run_at) filter (where status = 'queued' and run_at <= now()))::float8 as oldest
          from jobs
         where status in ('queued', 'running', 'dead')
           ${scope ? sql`and payload->>${scope.field} = any(${scope.values}::text[])` : sql``}`.execute(db);
  return rows[0];
}

/** Per kind: how many jobs are queued, running and dead, and how long the oldest ready one has waited (admin status). */
export async function kindStats(db: Kysely<DB>) {
  const { rows } = await sql<{ kind: string; queued: number; running: number; dead: number; oldest_ready_seconds: number | null }>`
    select kind,
      count(*) filter (where status = 'queued')::int as queued,
      count(*) filter (where status = 'running')::int as running,
      count(*) filter (where status = 'dead')::int as dead,
      extract(epoch from now() - min(run_at) filter (where status = 'queued' and run_at <= now()))::float8 as oldest_ready_seconds
    from jobs where status in ('queued', 'running', 'dead') group by kind order by kind`.execute(db);
  return rows;
}

/** Workers (instances) that held a job lease in the last `minutes` minutes: the instances that are working. */
export async function recentWorkers(db: Kysely<DB>, minutes: number) {
  const { rows } = await sql<{ worker: string; last_seen: Date }>`
    select locked_by as worker, max(updated_at) as last_seen from jobs
    where locked_by is not null and updated_at > now() - make_interval(mins => ${minutes})
    group by locked_by order by last_seen desc limit 50`.execute(db);
  return rows;
}
