import { randomBytes } from 'node:crypto';
import { sql, type Kysely } from 'kysely';
import postgres from 'postgres';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { openPGlite, openPostgres, type Database } from '../../db/database.ts';
import { migrateToLatest } from '../../db/migrate.ts';
import type { DB } from '../../db/types.ts';
import { createLogger } from '../../adapters/outbound/logger.ts';
import { batchJobHandler, PermanentJobError, type Job, type JobContext } from './handler.ts';
import { createJobQueue, type JobQueue } from './queue.ts';
import { claimJobs } from './repository.ts';

/**
 * Runs against embedded PGlite (in memory) by default, or against PostgreSQL in a scratch database of its own
 * when DATABASE_URL is set.
 */
const DATABASE_URL = process.env.DATABASE_URL;
const engine = DATABASE_URL ? 'postgres' : 'pglite';

let primary: Database;
/** A second connection pool to the same database (PostgreSQL), or the same PGlite handle. */
let secondary: Database;
let dropScratch: () => Promise<void> = async () => {};

beforeAll(async () => {
  if (DATABASE_URL) {
    const name = `jobs_test_${randomBytes(5).toString('hex')}`;
    const admin = postgres(DATABASE_URL, { max: 1, onnotice: () => {} });
    await admin.unsafe(`create database ${name}`);
    const url = new URL(DATABASE_URL);
    url.pathname = `/${name}`;
    primary = openPostgres(url.toString(), 10);
    await migrateToLatest(primary.db);
    secondary = openPostgres(url.toString(), 10);
    dropScratch = async () => {
      await admin.unsafe(`drop database if exists ${name} with (force)`);
      await admin.end();
    };
  } else {
    primary = await openPGlite({});
    await migrateToLatest(primary.db);
    secondary = primary;
  }
});

afterAll(async () => {
  if (secondary && secondary !== primary) await secondary.close();
  if (primary) await primary.close();
  await dropScratch();
});

let logs: string[] = [];
const logger = createLogger('debug', (line) => logs.push(line));
const queues: JobQueue[] = [];

function makeQueue(options: { db?: Kysely<DB>; workerId?: string; backoff?: (attempt: number) => number } = {}) {
  const queue = createJobQueue({ db: options.db ?? primary.db, logger, workerId: options.workerId, backoff: options.backoff ?? (() => 0) });
  queues.push(queue);
  return queue;
}

beforeEach(async () => {
  logs = [];
  await primary.db.deleteFrom('jobs').execute();
});

afterEach(async () => {
  for (const queue of queues.splice(0)) await queue.stop(200);
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function waitFor(check: () => Promise<boolean> | boolean, timeoutMs = 10_000, what = 'condition') {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check()) return;
    await sleep(20);
  }
  throw new Error(`timed out waiting for ${what}`);
}

const row = (id: string) => primary.db.selectFrom('jobs').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
const statusOf = async (id: string) => (await row(id)).status;

describe(`job queue (${engine})`, () => {
  it('enqueue + drain runs the handler once with the payload', async () => {
    const queue = makeQueue();
    const seen: Job[] = [];
    const id = await queue.enqueue('greet', { name: 'Ada', n: [1, 2] });
    expect(await statusOf(id)).toBe('queued');
    await queue.drain({ greet: async (job) => void seen.push(job) });
    expect(seen).toEqual([{ id, kind: 'greet', payload: { name: 'Ada', n: [1, 2] }, attempts: 1, maxAttempts: 5 }]);
    const done = await row(id);
    expect(done).toMatchObject({ status: 'done', attempts: 1, locked_by: null, lease_until: null, last_error: null });
    await queue.drain({ greet: async (job) => void seen.push(job) });
    expect(seen).toHaveLength(1);
  });

  it('string, null and undefined payloads round-trip as JSON', async () => {
    const queue = makeQueue();
    const got: unknown[] = [];
    await queue.enqueue('p', 'plain string', { runAt: new Date(Date.now() - 3000) });
    await queue.enqueue('p', null, { runAt: new Date(Date.now() - 2000) });
    await queue.enqueue('p', undefined, { runAt: new Date(Date.now() - 1000) });
    await queue.drain({ p: async (job) => void got.push(job.payload) });
    expect(got.sort()).toEqual(['plain string', null, null].sort());
  });

  it('retries with backoff and then succeeds', async () => {
    const queue = makeQueue({ backoff: () => 0 });
    let calls = 0;
    const id = await queue.enqueue('flaky', {});
    await queue.drain({
      flaky: async (job) => {
        calls++;
        expect(job.attempts).toBe(calls);
        if (calls < 3) throw new Error(`transient ${calls}`);
      },
    });
    expect(calls).toBe(3);
    expect(await row(id)).toMatchObject({ status: 'done', attempts: 3, last_error: 'transient 2' });
    const warns = logs.map((l) => JSON.parse(l)).filter((l) => l.level === 'warn');
    expect(warns).toHaveLength(2);
    expect(warns[0]).toMatchObject({ jobId: id, kind: 'flaky', attempt: 1, error: 'transient 1' });
  });

  it('schedules the retry with the backoff on the database clock and does not run it early', async () => {
    const attemptsSeen: number[] = [];
    const queue = makeQueue({
      backoff: (attempt) => {
        attemptsSeen.push(attempt);
        return 60_000;
      },
    });
    let calls = 0;
    const id = await queue.enqueue('later', {});
    await queue.drain({
      later: async () => {
        calls++;
        throw new Error('not yet');
      },
    });
    expect(calls).toBe(1);
    expect(attemptsSeen).toEqual([1]);
    const { rows } = await sql<{ ahead: number }>`select extract(epoch from run_at - now())::float8 as ahead from jobs where id = ${id}`.execute(primary.db);
    expect(rows[0]!.ahead).toBeGreaterThan(50);
    expect(rows[0]!.ahead).toBeLessThanOrEqual(60);
    expect(await row(id)).toMatchObject({ status: 'queued', attempts: 1, last_error: 'not yet', locked_by: null, lease_until: null });
  });

  it('a job that keeps failing goes dead after maxAttempts with last_error', async () => {
    const queue = makeQueue();
    let calls = 0;
    const id = await queue.enqueue('doomed', { x: 1 }, { maxAttempts: 3 });
    await queue.drain({
      doomed: async () => {
        calls++;
        throw new Error(`boom ${calls}`);
      },
    });
    expect(calls).toBe(3);
    expect(await row(id)).toMatchObject({ status: 'dead', attempts: 3, max_attempts: 3, last_error: 'boom 3', locked_by: null });
  });

  it('PermanentJobError goes dead at once', async () => {
    const queue = makeQueue();
    let calls = 0;
    const id = await queue.enqueue('perm', {});
    await queue.drain({
      perm: async () => {
        calls++;
        throw new PermanentJobError('invalid input');
      },
    });
    expect(calls).toBe(1);
    expect(await row(id)).toMatchObject({ status: 'dead', attempts: 1, last_error: 'invalid input' });
  });

  it('a handler that throws synchronously is a failure, not a crash', async () => {
    const queue = makeQueue();
    const id = await queue.enqueue('sync', {}, { maxAttempts: 2 });
    const handler = (() => {
      throw new Error('sync throw');
    }) as unknown as () => Promise<void>;
    await queue.drain({ sync: handler });
    expect(await row(id)).toMatchObject({ status: 'dead', attempts: 2, last_error: 'sync throw' });
  });

  it('an unknown kind goes dead with "no handler for kind X"', async () => {
    const queue = makeQueue();
    const id = await queue.enqueue('mystery', {});
    await queue.drain({ other: async () => {} });
    expect(await row(id)).toMatchObject({ status: 'dead', attempts: 1, last_error: 'no handler for kind mystery' });
    // Not tricked by Object.prototype members.
    const id2 = await queue.enqueue('toString', {});
    await queue.drain({});
    expect(await row(id2)).toMatchObject({ status: 'dead', last_error: 'no handler for kind toString' });
  });

  it('dedupeKey: a second enqueue while queued/running returns the existing id; after done a new job is created', async () => {
    const queue = makeQueue();
    const a = await queue.enqueue('reindex', { v: 1 }, { dedupeKey: 'kb:1' });
    const b = await queue.enqueue('reindex', { v: 2 }, { dedupeKey: 'kb:1' });
    const c = await queue.enqueue('reindex', { v: 3 }, { dedupeKey: 'kb:2' });
    expect(b).toBe(a);
    expect(c).not.toBe(a);
    // Concurrent enqueues of one key (separate connections on PostgreSQL) agree on one job.
    const racing = await Promise.all(
      Array.from({ length: 10 }, (_, i) => queue.enqueue('reindex', { i }, { dedupeKey: 'kb:3' }, i % 2 ? secondary.db : primary.db)),
    );
    expect(new Set(racing).size).toBe(1);
    expect(
      Number(
        (
          await primary.db
            .selectFrom('jobs')
            .select((eb) => eb.fn.countAll().as('n'))
            .executeTakeFirstOrThrow()
        ).n,
      ),
    ).toBe(3);

    // While running, still deduplicated.
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const payloads: unknown[] = [];
    const draining = queue.drain({
      reindex: async (job) => {
        payloads.push(job.payload);
        await gate;
      },
    });
    await waitFor(async () => (await statusOf(a)) === 'running', 5000, 'running');
    expect(await queue.enqueue('reindex', { v: 4 }, { dedupeKey: 'kb:1' })).toBe(a);
    release();
    await draining;
    expect(payloads).toContainEqual({ v: 1 });
    expect(await statusOf(a)).toBe('done');
    const d = await queue.enqueue('reindex', { v: 5 }, { dedupeKey: 'kb:1' });
    expect(d).not.toBe(a);
    expect(await statusOf(d)).toBe('queued');
  });

  it('enqueue inside a transaction: rolled back → no job; committed → job', async () => {
    const queue = makeQueue();
    await expect(
      primary.db.transaction().execute(async (trx) => {
        await queue.enqueue('outbox', { n: 1 }, {}, trx);
        await queue.enqueue('outbox', { n: 1 }, { dedupeKey: 'k' }, trx);
        throw new Error('rollback');
      }),
    ).rejects.toThrow('rollback');
    expect(await primary.db.selectFrom('jobs').selectAll().execute()).toEqual([]);
    const id = await primary.db.transaction().execute((trx) => queue.enqueue('outbox', { n: 2 }, { dedupeKey: 'k' }, trx));
    expect(await row(id)).toMatchObject({ kind: 'outbox', payload: { n: 2 }, status: 'queued', dedupe_key: 'k' });
  });

  it('an expired lease (crashed worker) lets another queue take the job over; the old worker loses it', async () => {
    const crashed = makeQueue({ workerId: 'worker-crashed' });
    let oldCtx: JobContext | undefined;
    crashed.start(
      {
        work: (_job, ctx) => {
          oldCtx = ctx;
          return new Promise<void>(() => {});
        },
      },
      { leaseMs: 60_000, pollIntervalMs: 60_000, concurrency: 1 },
    );
    // (concurrency 1 + a long poll interval: once its one slot is taken this "crashed" worker claims nothing more.)
    const id = await crashed.enqueue('work', { n: 1 });
    crashed.notify();
    await waitFor(() => oldCtx !== undefined, 5000, 'claim');
    expect(await row(id)).toMatchObject({ status: 'running', locked_by: 'worker-crashed', attempts: 1 });

    // A second queue does not take it while the lease is valid.
    const rescuer = makeQueue({ db: secondary.db, workerId: 'worker-rescuer' });
    let rescued = 0;
    await rescuer.drain({ work: async () => void rescued++ });
    expect(rescued).toBe(0);

    // "Crash": the old worker stops renewing; its lease runs out.
    await sql`update jobs set lease_until = now() - interval '1 second' where id = ${id}`.execute(primary.db);
    await rescuer.drain({ work: async () => void rescued++ });
    expect(rescued).toBe(1);
    expect(await row(id)).toMatchObject({ status: 'done', attempts: 2, locked_by: null });

    // The old worker's heartbeat now finds the job gone: it throws and aborts the handler's signal.
    await expect(oldCtx!.heartbeat()).rejects.toThrow(/no longer held/);
    expect(oldCtx!.signal.aborted).toBe(true);
    await crashed.stop(100);
    expect(await row(id)).toMatchObject({ status: 'done', attempts: 2 });
  });

  it('an expired lease on the final attempt sends the job to dead instead of running it again', async () => {
    const queue = makeQueue();
    const id = await queue.enqueue('work', {}, { maxAttempts: 1 });
    await sql`update jobs set status = 'running', attempts = 1, locked_by = 'gone', lease_until = now() - interval '1 second' where id = ${id}`.execute(
      primary.db,
    );
    let calls = 0;
    await queue.drain({ work: async () => void calls++ });
    expect(calls).toBe(0);
    expect(await row(id)).toMatchObject({ status: 'dead', last_error: expect.stringMatching(/lease expired/) });
  });

  it('a batch kind gets its ready jobs in one call; a failed job of the batch is retried alone, the others are done', async () => {
    const queue = makeQueue();
    const ids = [];
    for (let n = 0; n < 5; n++) ids.push(await queue.enqueue('batch', { n }));
    const calls: number[][] = [];
    const handler = batchJobHandler<{ n: number }>(10, async (jobs) => {
      calls.push(jobs.map((j) => j.payload.n));
      // The job with n = 2 fails on its first attempt only.
      return new Map(jobs.filter((j) => j.payload.n === 2 && j.attempts === 1).map((j) => [j.id, new Error('n = 2 failed')]));
    });
    await queue.drain({ batch: handler });
    expect(calls[0]!.sort()).toEqual([0, 1, 2, 3, 4]);
    expect(calls.slice(1)).toEqual([[2]]);
    for (const id of ids) expect(await row(id)).toMatchObject({ status: 'done', locked_by: null });
    expect(await row(ids[2]!)).toMatchObject({ attempts: 2, last_error: 'n = 2 failed' });
  });

  it('a batch handler that rejects fails every job of the batch; a batch of one is the plain handler', async () => {
    const queue = makeQueue();
    const ids = [await queue.enqueue('batch', { n: 1 }, { maxAttempts: 1 }), await queue.enqueue('batch', { n: 2 }, { maxAttempts: 1 })];
    const handler = batchJobHandler<{ n: number }>(10, async () => {
      throw new Error('the whole batch failed');
    });
    await queue.drain({ batch: handler });
    for (const id of ids) expect(await row(id)).toMatchObject({ status: 'dead', last_error: 'the whole batch failed' });
    const job = { id: 'x', kind: 'batch', payload: { n: 3 }, attempts: 1, maxAttempts: 1 };
    await expect(handler(job, { signal: new AbortController().signal, heartbeat: async () => {} })).rejects.toThrow('the whole batch failed');
  });

  it('a worker that crashes mid-batch: every job of the batch comes back after its lease and is done once', async () => {
    const crashed = makeQueue({ workerId: 'batch-crashed' });
    let started = 0;
    // Enqueued before the worker starts: a worker polling between two enqueues would claim a batch of one.
    const ids = [];
    for (let n = 0; n < 3; n++) ids.push(await crashed.enqueue('batch', { n }));
    crashed.start(
      {
        batch: batchJobHandler(10, (jobs) => {
          started += jobs.length;
          return new Promise<Map<string, unknown>>(() => {});
        }),
      },
      { leaseMs: 60_000, pollIntervalMs: 60_000, concurrency: 1 },
    );
    crashed.notify();
    await waitFor(() => started === 3, 5000, 'the batch to be claimed');
    for (const id of ids) expect(await row(id)).toMatchObject({ status: 'running', locked_by: 'batch-crashed' });
    // "Crash": the leases run out; another worker takes the whole batch over.
    await sql`update jobs set lease_until = now() - interval '1 second' where locked_by = 'batch-crashed'`.execute(primary.db);
    const rescuer = makeQueue({ db: secondary.db, workerId: 'batch-rescuer' });
    const done: number[] = [];
    await rescuer.drain({
      batch: batchJobHandler<{ n: number }>(10, async (jobs) => {
        done.push(...jobs.map((j) => j.payload.n));
        return new Map();
      }),
    });
    expect(done.sort()).toEqual([0, 1, 2]);
    for (const id of ids) expect(await row(id)).toMatchObject({ status: 'done', attempts: 2 });
    await crashed.stop(100);
    for (const id of ids) expect(await row(id)).toMatchObject({ status: 'done', attempts: 2 });
  });

  it('heartbeats keep a job longer than leaseMs from being stolen', async () => {
    const slow = makeQueue({ workerId: 'slow' });
    let calls = 0;
    let finished = false;
    slow.start(
      {
        long: async () => {
          calls++;
          await sleep(4000);
          finished = true;
        },
      },
      // Renewed every 500 ms: a CI machine under load can stall a renewal by a few hundred ms (with 300 ms leases the
      // worker's own poller once re-ran the job after such a stall), but not by a whole second.
      { leaseMs: 1500, pollIntervalMs: 20 },
    );
    const id = await slow.enqueue('long', {});
    slow.notify();
    await waitFor(async () => (await statusOf(id)) === 'running', 5000, 'running');

    const thief = makeQueue({ db: secondary.db, workerId: 'thief' });
    let stolen = 0;
    while (!finished) {
      await thief.drain({ long: async () => void stolen++ });
      await sleep(50);
    }
    await waitFor(async () => (await statusOf(id)) === 'done', 5000, 'done');
    expect(stolen).toBe(0);
    expect(calls).toBe(1);
    expect(await row(id)).toMatchObject({ status: 'done', attempts: 1 });
    expect(logs.some((l) => l.includes('lease lost'))).toBe(false);
  });

  it('without heartbeats the same setup would be stolen (control for the test above)', async () => {
    const queue = makeQueue({ workerId: 'owner' });
    const id = await queue.enqueue('long', {});
    // Claim it "by hand" with a 300 ms lease and never renew it.
    await sql`update jobs set status = 'running', attempts = 1, locked_by = 'owner-no-heartbeat', lease_until = now() + interval '300 milliseconds' where id = ${id}`.execute(
      primary.db,
    );
    await sleep(400);
    const thief = makeQueue({ db: secondary.db, workerId: 'thief' });
    let stolen = 0;
    await thief.drain({ long: async () => void stolen++ });
    expect(stolen).toBe(1);
  });

  it('two queues on separate connections process 200 jobs, each exactly once', async () => {
    const a = makeQueue({ workerId: 'A' });
    const b = makeQueue({ db: secondary.db, workerId: 'B' });
    const ids: string[] = [];
    for (let i = 0; i < 200; i++) ids.push(await a.enqueue('unit', { i }));
    const invocations = new Map<string, number>();
    const byWorker = { A: 0, B: 0 };
    const inflight = { A: 0, B: 0 };
    const peak = { A: 0, B: 0 };
    const handler = (w: 'A' | 'B') => async (job: Job) => {
      invocations.set(job.id, (invocations.get(job.id) ?? 0) + 1);
      byWorker[w]++;
      inflight[w]++;
      peak[w] = Math.max(peak[w], inflight[w]);
      await sleep(Math.random() * 6);
      inflight[w]--;
    };
    a.start({ unit: handler('A') }, { concurrency: 4, pollIntervalMs: 20 });
    b.start({ unit: handler('B') }, { concurrency: 4, pollIntervalMs: 20 });
    await waitFor(
      async () =>
        Number(
          (
            await primary.db
              .selectFrom('jobs')
              .select((eb) => eb.fn.countAll().as('n'))
              .where('status', '=', 'done')
              .executeTakeFirstOrThrow()
          ).n,
        ) === 200,
      60_000,
      '200 done',
    );
    await Promise.all([a.stop(), b.stop()]);
    expect(invocations.size).toBe(200);
    for (const id of ids) expect(invocations.get(id), id).toBe(1);
    expect(byWorker.A + byWorker.B).toBe(200);
    expect(byWorker.A).toBeGreaterThan(0);
    expect(byWorker.B).toBeGreaterThan(0);
    expect(peak.A).toBeLessThanOrEqual(4);
    expect(peak.B).toBeLessThanOrEqual(4);
    const attempts = await primary.db.selectFrom('jobs').select('attempts').distinct().execute();
    expect(attempts).toEqual([{ attempts: 1 }]);
  });

  it('stop() releases an in-flight job back to queued without counting the attempt', async () => {
    const queue = makeQueue();
    let sawAbort = false;
    queue.start(
      {
        cooperative: (_job, ctx) =>
          new Promise<void>((_, reject) =>
            ctx.signal.addEventListener('abort', () => {
              sawAbort = true;
              reject(ctx.signal.reason);
            }),
          ),
      },
      { pollIntervalMs: 20 },
    );
    const id = await queue.enqueue('cooperative', {});
    queue.notify();
    await waitFor(async () => (await statusOf(id)) === 'running', 5000, 'running');
    await queue.stop(2000);
    expect(sawAbort).toBe(true);
    expect(await row(id)).toMatchObject({ status: 'queued', attempts: 0, locked_by: null, lease_until: null });

    // It runs normally afterwards.
    const again = makeQueue();
    let ran = 0;
    await again.drain({ cooperative: async () => void ran++ });
    expect(ran).toBe(1);
    expect(await row(id)).toMatchObject({ status: 'done', attempts: 1 });
  });

  it('stop() gives up on a handler that ignores the signal after timeoutMs and releases its job', async () => {
    const queue = makeQueue();
    let claimed = false;
    queue.start(
      {
        stubborn: () => {
          claimed = true;
          return new Promise<void>(() => {});
        },
      },
      { pollIntervalMs: 20 },
    );
    const id = await queue.enqueue('stubborn', {});
    queue.notify();
    await waitFor(() => claimed, 5000, 'claim');
    const started = Date.now();
    await queue.stop(150);
    expect(Date.now() - started).toBeLessThan(2000);
    expect(await row(id)).toMatchObject({ status: 'queued', attempts: 0, locked_by: null, lease_until: null });
  });

  it('notify() wakes the poller without waiting for the poll interval', async () => {
    const queue = makeQueue();
    let ran = 0;
    queue.start({ quick: async () => void ran++ }, { pollIntervalMs: 60_000 });
    await sleep(100); // the first (empty) poll has happened; the next one is a minute away
    await queue.enqueue('quick', {});
    queue.notify();
    await waitFor(() => ran === 1, 3000, 'run after notify');
  });

  it('stats() counts queued, running and dead and reports the oldest due queued age', async () => {
    const queue = makeQueue();
    expect(await queue.stats()).toEqual({ queued: 0, running: 0, dead: 0, oldestQueuedAgeSeconds: null });

    const deadId = await queue.enqueue('nobody', {});
    await queue.drain({});
    expect(await statusOf(deadId)).toBe('dead');

    let holding = false;
    queue.start(
      {
        hold: () => {
          holding = true;
          return new Promise<void>(() => {});
        },
      },
      { concurrency: 1, pollIntervalMs: 20 },
    );
    await queue.enqueue('hold', {});
    queue.notify();
    await waitFor(() => holding, 5000, 'hold');

    const due = await queue.enqueue('later', {});
    await sql`update jobs set run_at = now() - interval '30 seconds' where id = ${due}`.execute(primary.db);
    await queue.enqueue('later', {}, { runAt: new Date(Date.now() + 3_600_000) });
    await primary.db.insertInto('jobs').values({ id: crypto.randomUUID(), kind: 'old', payload: sql`'{}'::jsonb`, status: 'done' }).execute();

    const stats = await queue.stats();
    expect(stats).toMatchObject({ queued: 2, running: 1, dead: 1 });
    expect(stats.oldestQueuedAgeSeconds).toBeGreaterThanOrEqual(29);
    expect(stats.oldestQueuedAgeSeconds).toBeLessThan(60);
  });

  describe('fair claims (perKeyLimit)', () => {
    /** Enqueues `n` jobs of `kind` for `key`, with run_at one second apart starting `agoSeconds` ago (oldest first). */
    async function enqueueFor(queue: JobQueue, kind: string, key: string | undefined, n: number, agoSeconds: number) {
      for (let i = 0; i < n; i++) {
        await queue.enqueue(kind, { key, i }, { runAt: new Date(Date.now() - (agoSeconds - i) * 1000), ...(key ? { fairKey: key } : {}) });
      }
    }

    /** Starts `queue` with handlers that hold every job until released, recording which keys ran and how many at once. */
    function holdingQueue(queue: JobQueue, options: { concurrency: number; perKeyLimit?: number; onlyHandledKinds?: boolean; fairKeyPrefix?: string }) {
      const started: string[] = [];
      const running = new Map<string, number>();
      const mostRunning = new Map<string, number>();
      const releases: Array<() => void> = [];
      const hold = async (job: Job<{ key?: string }>) => {
        const key = job.payload.key ?? '(none)';
        started.push(key);
        running.set(key, (running.get(key) ?? 0) + 1);
        mostRunning.set(key, Math.max(mostRunning.get(key) ?? 0, running.get(key)!));
        await new Promise<void>((resolve) => releases.push(resolve));
        running.set(key, running.get(key)! - 1);
      };
      queue.start({ hold, other: hold }, { pollIntervalMs: 20, ...options });
      return {
        started,
        mostRunning,
        /** Lets the `n` longest-held jobs finish. */
        release: (n: number) => releases.splice(0, n).forEach((resolve) => resolve()),
        releaseAll: () => releases.splice(0).forEach((resolve) => resolve()),
      };
    }

    it('one key never holds more than perKeyLimit workers; another key is served by the free ones, though its jobs are newer', async () => {
      const queue = makeQueue();
      await enqueueFor(queue, 'hold', 'tenant-a', 10, 100);
      await enqueueFor(queue, 'hold', 'tenant-b', 2, 10);
      const held = holdingQueue(queue, { concurrency: 4, perKeyLimit: 2 });
      queue.notify();
      await waitFor(() => held.started.length === 4, 5000, 'four jobs running');
      await sleep(200); // a claim that ignored the limit would have taken a third job of tenant-a by now
      expect(held.started.filter((k) => k === 'tenant-a')).toHaveLength(2);
      expect(held.started.filter((k) => k === 'tenant-b')).toHaveLength(2);
      // As tenant-a's jobs finish, its next ones take their place: never more than two at once.
      for (let i = 0; i < 10; i++) {
        held.release(1);
        await sleep(30);
      }
      // Whatever is claimed from now on is let go too, until nothing is left.
      await waitFor(
        async () => {
          held.releaseAll();
          const stats = await queue.stats();
          return stats.queued + stats.running === 0;
        },
        10_000,
        'everything done',
      );
      expect(held.mostRunning.get('tenant-a')).toBe(2);
      expect(held.started.filter((k) => k === 'tenant-a')).toHaveLength(10);
    });

    it('the keys with the fewest jobs running go first, then the oldest: a newer key is not queued behind an older backlog', async () => {
      const queue = makeQueue();
      await enqueueFor(queue, 'hold', 'tenant-a', 6, 100);
      await enqueueFor(queue, 'hold', 'tenant-b', 1, 10);
      // No limit to speak of (3 of 3 workers): only the order decides.
      const held = holdingQueue(queue, { concurrency: 3, perKeyLimit: 3 });
      queue.notify();
      await waitFor(() => held.started.length === 3, 5000, 'three jobs running');
      expect([...held.started].sort()).toEqual(['tenant-a', 'tenant-a', 'tenant-b']);
      held.releaseAll();
    });

    it('without perKeyLimit the same jobs run oldest first, so the newer key waits (control for the two tests above)', async () => {
      const queue = makeQueue();
      await enqueueFor(queue, 'hold', 'tenant-a', 6, 100);
      await enqueueFor(queue, 'hold', 'tenant-b', 1, 10);
      const held = holdingQueue(queue, { concurrency: 3 });
      queue.notify();
      await waitFor(() => held.started.length === 3, 5000, 'three jobs running');
      await sleep(100);
      expect(held.started).toEqual(['tenant-a', 'tenant-a', 'tenant-a']);
      held.releaseAll();
    });

    it('jobs without a key, and a keyed job whose worker died, are still claimed; live leases of every worker count toward the limit', async () => {
      const queue = makeQueue();
      await enqueueFor(queue, 'other', undefined, 2, 50);
      // tenant-a: one job leased by another, live worker, and two queued; tenant-c: one job whose worker died.
      const elsewhere = await queue.enqueue('hold', { key: 'tenant-a' }, { fairKey: 'tenant-a' });
      await sql`update jobs set status = 'running', attempts = 1, locked_by = 'elsewhere', lease_until = now() + interval '1 minute' where id = ${elsewhere}`.execute(
        primary.db,
      );
      await enqueueFor(queue, 'hold', 'tenant-a', 2, 40);
      const dead = await queue.enqueue('hold', { key: 'tenant-c' }, { fairKey: 'tenant-c' });
      await sql`update jobs set status = 'running', attempts = 1, locked_by = 'crashed', lease_until = now() - interval '1 second' where id = ${dead}`.execute(
        primary.db,
      );
      const held = holdingQueue(queue, { concurrency: 5, perKeyLimit: 2 });
      queue.notify();
      await waitFor(() => held.started.length >= 4, 5000, 'four jobs running');
      await sleep(200); // a free worker is left, but tenant-a's second queued job would be its third at once
      expect([...held.started].sort()).toEqual(['(none)', '(none)', 'tenant-a', 'tenant-c']);
      expect(await row(dead)).toMatchObject({ status: 'running', attempts: 2 });
      held.releaseAll();
    });

    it("jobs whose lease ran out count as running: a crashed worker's jobs and the backlog together stay within the limit", async () => {
      const queue = makeQueue();
      await enqueueFor(queue, 'hold', 'tenant-a', 3, 100);
      await sql`update jobs set status = 'running', attempts = 1, locked_by = 'crashed', lease_until = now() - interval '1 second' where fair_key = 'tenant-a'`.execute(
        primary.db,
      );
      await enqueueFor(queue, 'hold', 'tenant-a', 5, 50);
      const held = holdingQueue(queue, { concurrency: 8, perKeyLimit: 3 });
      queue.notify();
      await waitFor(() => held.started.length >= 3, 5000, "the crashed worker's jobs running again");
      await sleep(300);
      expect(held.started).toHaveLength(3);
      expect(await queue.stats()).toMatchObject({ queued: 5, running: 3 });
      held.releaseAll();
    });

    it.skipIf(!DATABASE_URL)('two instances claiming at the same moment: the second takes the next jobs, not nothing (PostgreSQL)', async () => {
      for (const key of ['tenant-a', 'tenant-b', 'tenant-c']) await enqueueFor(makeQueue(), 'hold', key, 10, 100);
      const fair = { perKeyLimit: 4, withExpired: true };
      const inFirst = await primary.db.transaction().execute(async (trx) => {
        // The first instance's claim holds its row locks until it commits.
        const first = await claimJobs(trx as unknown as Kysely<DB>, 'instance-1', 4, 60_000, ['hold'], fair);
        const second = await claimJobs(secondary.db, 'instance-2', 4, 60_000, ['hold'], fair);
        expect(second).toHaveLength(4);
        expect(second.map((r) => r.id)).not.toContain(first[0]!.id);
        return first.length;
      });
      expect(inFirst).toBe(4);
    });

    it("another queue's running jobs under the same key do not count toward this queue's limit", async () => {
      const queue = makeQueue();
      await enqueueFor(queue, 'elsewhere', 'tenant-a', 5, 100);
      await sql`update jobs set status = 'running', attempts = 1, locked_by = 'other-queue', lease_until = now() + interval '1 minute' where kind = 'elsewhere'`.execute(
        primary.db,
      );
      await enqueueFor(queue, 'hold', 'tenant-a', 3, 50);
      const held = holdingQueue(queue, { concurrency: 4, perKeyLimit: 2, onlyHandledKinds: true });
      queue.notify();
      await waitFor(() => held.started.length >= 2, 5000, 'two jobs running');
      await sleep(200);
      expect(held.started).toEqual(['tenant-a', 'tenant-a']);
      held.releaseAll();
    });

    it('a queue with a key prefix walks only its own keys', async () => {
      const queue = makeQueue();
      await enqueueFor(queue, 'hold', 'mine:a', 2, 100);
      await enqueueFor(queue, 'hold', 'mine:b', 1, 90);
      // Keyed outside the queue's range (no queue of ours would do that): not among its keys.
      await enqueueFor(queue, 'hold', 'theirs:c', 1, 200);
      const held = holdingQueue(queue, { concurrency: 8, perKeyLimit: 8, fairKeyPrefix: 'mine:' });
      queue.notify();
      await waitFor(() => held.started.length >= 3, 5000, 'three jobs running');
      await sleep(200);
      expect([...held.started].sort()).toEqual(['mine:a', 'mine:a', 'mine:b']);
      held.releaseAll();
    });

    it('refuses a perKeyLimit that is not a positive integer', () => {
      expect(() => makeQueue().start({}, { perKeyLimit: 0 })).toThrow(RangeError);
    });
  });

  it('deletes done jobs older than 24 h when the poller starts', async () => {
    const queue = makeQueue();
    const oldId = await queue.enqueue('x', {});
    const recentId = await queue.enqueue('x', {});
    await queue.drain({ x: async () => {} });
    await sql`update jobs set updated_at = now() - interval '25 hours' where id = ${oldId}`.execute(primary.db);
    queue.start({}, { pollIntervalMs: 20 });
    await waitFor(async () => (await primary.db.selectFrom('jobs').select('id').where('id', '=', oldId).executeTakeFirst()) === undefined, 5000, 'cleanup');
    expect(await statusOf(recentId)).toBe('done');
  });
});
