import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type { Kysely, Transaction } from 'kysely';
import type { DB } from '../../db/types.ts';
import type { Logger } from '../../adapters/outbound/logger.ts';
import * as repo from './repository.ts';

/**
 * A durable job queue on the `jobs` table (db/migrations/0002_knowledge_base.ts); its SQL is in repository.ts.
 *
 * Jobs are claimed in one short UPDATE … WHERE id IN (SELECT … FOR UPDATE SKIP LOCKED) statement that sets a
 * lease; the lease is renewed while the handler runs and a job whose lease expires (a crashed worker) becomes
 * claimable again, its attempt counted. No transaction is ever held open while a handler runs (PGlite is one
 * connection). All times that matter — run_at, lease_until — are computed by the database (now()), never by the
 * process clock. A claim is identified by (locked_by, attempts): every later write for that claim (heartbeat,
 * done, retry, dead, release) is conditional on both, so a worker that lost its lease can never overwrite the
 * state written by the worker that took the job over.
 */

export interface Job<P = unknown> {
  id: string;
  kind: string;
  payload: P;
  attempts: number;
  maxAttempts: number;
}

export interface JobContext {
  signal: AbortSignal;
  /** extends the lease now (also done automatically every leaseMs/3 while the handler runs) */
  heartbeat(): Promise<void>;
}

export type JobHandler<P = any> = ((job: Job<P>, ctx: JobContext) => Promise<void>) & { batch?: BatchOptions<P> };

/**
 * A kind whose jobs are worth doing together (one document's ingestion is a dozen statements and two worker
 * round trips; fifty documents in one go are about as many). The queue claims up to `size` ready jobs of the kind
 * at once, renews their leases and marks them done in one statement each; every job keeps its own row, attempts,
 * retries and dead letter.
 */
export interface BatchOptions<P = any> {
  size: number;
  /** Resolves with the jobs that failed and why (the others are done); a rejection fails every job of the batch. */
  run(jobs: Array<Job<P>>, ctx: JobContext): Promise<Map<string, unknown>>;
}

/** A handler of batches that is still a JobHandler: called with one job it runs a batch of one. */
export function batchJobHandler<P>(size: number, run: BatchOptions<P>['run']): JobHandler<P> {
  if (!(Number.isInteger(size) && size >= 1)) throw new RangeError('batch size must be a positive integer');
  const single = async (job: Job<P>, ctx: JobContext) => {
    const failures = await run([job], ctx);
    if (failures.has(job.id)) throw failures.get(job.id);
  };
  return Object.assign(single, { batch: { size, run } });
}

/** Thrown by a handler: no retry, the job goes straight to 'dead'. */
export class PermanentJobError extends Error {
  constructor(message?: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'PermanentJobError';
  }
}

/**
 * Thrown by a handler whose work is not due yet (a webhook retry schedule): the job goes back to the queue
 * for `runAt` and the attempt is not counted against maxAttempts. The handler owns that schedule, so it
 * gives an absolute time from its own clock.
 */
export class RescheduleJob extends Error {
  constructor(
    readonly runAt: Date,
    message = 'rescheduled',
  ) {
    super(message);
    this.name = 'RescheduleJob';
  }
}

/**
 * Thrown by a handler that stop() interrupted when the interrupted attempt must count all the same (retried with
 * backoff, dead after maxAttempts) rather than be given back unchanged: work a remote party can stall until the
 * deadline, such as an SMTP send, would otherwise never use up its attempts on an instance that restarts sooner.
 */
export class CountedAttemptError extends Error {
  constructor(message?: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'CountedAttemptError';
  }
}

export interface EnqueueOptions {
  runAt?: Date;
  maxAttempts?: number;
  dedupeKey?: string;
  /**
   * Whom the job is for, in this queue's own key space (`webhook:<owner>`); a queue started with perKeyLimit shares
   * its workers fairly among keys.
   */
  fairKey?: string;
}

export interface JobQueue {
  /**
   * Inserts a job; pass a Kysely transaction as `db` to enqueue atomically with the change that caused it (outbox).
   * With dedupeKey, a second enqueue while one with that key is queued/running is a no-op (returns the existing id).
   * Rows and their jobs written in one statement use repository.ts's jobInsertsFor instead: keep the two in step.
   */
  enqueue(kind: string, payload: unknown, options?: EnqueueOptions, db?: Kysely<DB> | Transaction<DB>): Promise<string>;
  /** Starts polling: claims up to `concurrency` jobs at a time with FOR UPDATE SKIP LOCKED, sets status running + lease_until + locked_by, runs handlers. */
  start(
    handlers: Record<string, JobHandler>,
    options?: {
      concurrency?: number;
      pollIntervalMs?: number;
      leaseMs?: number;
      onlyHandledKinds?: boolean;
      perKeyLimit?: number;
      fairKeyPrefix?: string;
    },
  ): void;
  /**
   * Stops claiming, aborts running handlers' signals, waits for them (bounded by timeoutMs, default 10 s), releases
   * unfinished jobs back to queued without counting an attempt (but for a handler that throws CountedAttemptError).
   */
  stop(timeoutMs?: number): Promise<void>;
  /** Runs until no job is ready (for tests/benchmarks): claims and runs jobs until the queue has nothing ready now. */
  drain(handlers?: Record<string, JobHandler>, options?: { onlyHandledKinds?: boolean }): Promise<void>;
  /** Wake the poller now (called after enqueue in the same process so work starts without waiting for the poll interval). */
  notify(): void;
  /** The queue's counts; with `scope`, only the jobs whose payload field `field` is one of `values` (an owner's). */
  stats(scope?: { field: string; values: string[] }): Promise<{ queued: number; running: number; dead: number; oldestQueuedAgeSeconds: number | null }>;
  /**
   * Removes the queued and running jobs whose payload field `field` is one of `values` (their subject was deleted);
   * pass a transaction as `db` to do it with that deletion.
   */
  cancel(field: string, values: string[], db?: Kysely<DB> | Transaction<DB>): Promise<void>;
}

export interface JobQueueDeps {
  db: Kysely<DB>;
  logger: Logger;
  /** Written to jobs.locked_by; must differ between instances. Default: host:pid:random. */
  workerId?: string;
  /** Process clock, used only to pace housekeeping (the done-row cleanup); leases and run_at use the database clock. */
  now?: () => Date;
  /** Delay before retry number `attempt + 1`, in ms, given the attempts made so far (≥ 1). */
  backoff?: (attempt: number) => number;
}

const DEFAULT_CONCURRENCY = 4;
const DEFAULT_POLL_INTERVAL_MS = 1_000;
const DEFAULT_LEASE_MS = 60_000;
const DEFAULT_STOP_TIMEOUT_MS = 10_000;
const CLEANUP_EVERY_MS = 60_000;
const MAX_ERROR_LENGTH = 4_000;

/** 2^attempt seconds, capped at 10 minutes, ± 20 % jitter. */
export function defaultBackoff(attempt: number): number {
  const base = Math.min(2 ** Math.max(0, attempt) * 1_000, 10 * 60_000);
  return Math.round(base * (0.8 + Math.random() * 0.4));
}

interface Run {
  /** The first (and, but for a batch, only) job. */
  job: Job;
  jobs: Job[];
  controller: AbortController;
  timer: ReturnType<typeof setInterval> | undefined;
  heartbeatInFlight: boolean;
  /** stop() aborted the signal: a rejection then releases the job instead of counting a failure. */
  stopAborted: boolean;
  /** stop() gave up waiting and released the job; whatever the handler does later is ignored. */
  released: boolean;
  /** A heartbeat found the job no longer ours (lease expired and taken over). */
  leaseLost: boolean;
  /** Settles when the handler and the bookkeeping after it are finished. */
  done: Promise<void>;
}

interface StartOptions {
  concurrency: number;
  pollIntervalMs: number;
  leaseMs: number;
  /** Claim only these kinds (the handlers' own): several queues with their own concurrency share one table. */
  kinds?: string[];
  /**
   * Claim fairly among fair keys: at most this many jobs of one key running at once, and the keys with the fewest
   * running served first, so no key's backlog or slow jobs hold every worker (repository.ts claimJobs).
   */
  perKeyLimit?: number;
  /** Every fair key of this queue starts with it (`webhook:`), so its claims read no other queue's keys. */
  fairKeyPrefix?: string;
}

function errorText(error: unknown): string {
  let text: string;
  if (error instanceof Error) text = error.message || error.name;
  else if (typeof error === 'string') text = error;
  else {
    try {
      text = JSON.stringify(error) ?? String(error);
    } catch {
      text = String(error);
    }
  }
  return text.length > MAX_ERROR_LENGTH ? text.slice(0, MAX_ERROR_LENGTH) + '…' : text;
}

export function createJobQueue(deps: JobQueueDeps): JobQueue {
  const { db, logger } = deps;
  const workerId = deps.workerId ?? `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
  const clock = deps.now ?? (() => new Date());
  const backoff = deps.backoff ?? defaultBackoff;

  let handlers: Record<string, JobHandler> = {};
  let options: StartOptions = { concurrency: DEFAULT_CONCURRENCY, pollIntervalMs: DEFAULT_POLL_INTERVAL_MS, leaseMs: DEFAULT_LEASE_MS };
  let loopPromise: Promise<void> | undefined;
  let stopping = false;
  let pollerRuns = 0;
  const active = new Set<Run>();
  let lastCleanup = -Infinity;

  // Wake-up for the poller: notify(), a finished job, or stop(). A wake with nobody waiting is remembered.
  let waiter: (() => void) | undefined;
  let pendingWake = false;
  function wake() {
    if (waiter) {
      const w = waiter;
      waiter = undefined;
      w();
    } else pendingWake = true;
  }
  function waitForWake(ms: number): Promise<void> {
    if (pendingWake) {
      pendingWake = false;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        waiter = undefined;
        resolve();
      }, ms);
      waiter = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  }

  // A fair queue's claims also look for jobs whose lease ran out at most once a poll interval (and in drain()),
  // taking as many as workers are free then: they are rare (a crashed worker's), and every claim need not pay for
  // looking (repository.ts fairCandidates).
  let lastExpiredClaim = -Infinity;
  const claim = (limit: number, leaseMs: number, kinds?: string[], expiredNow = false) => {
    if (options.perKeyLimit === undefined) return repo.claimJobs(db, workerId, limit, leaseMs, kinds);
    const at = performance.now();
    const withExpired = expiredNow || at - lastExpiredClaim >= options.pollIntervalMs;
    if (withExpired) lastExpiredClaim = at;
    return repo.claimJobs(db, workerId, limit, leaseMs, kinds, { perKeyLimit: options.perKeyLimit, withExpired, keyPrefix: options.fairKeyPrefix });
  };
  const claimOf = (job: Job): repo.Claim => ({ id: job.id, attempts: job.attempts, workerId });
  const extendLease = (job: Job, leaseMs: number) => repo.extendLease(db, claimOf(job), leaseMs);
  const extendLeases = (jobs: Job[], leaseMs: number) => repo.extendLeases(db, jobs.map(claimOf), leaseMs);
  const markDone = (job: Job) => repo.markDone(db, claimOf(job));
  const markDead = (job: Job, error: string) => repo.markDead(db, claimOf(job), error);
  const markRetry = (job: Job, error: string, delayMs: number) => repo.markRetry(db, claimOf(job), error, delayMs);
  const markRescheduled = (job: Job, note: string, runAt: Date) => repo.markRescheduled(db, claimOf(job), note, runAt);
  /** Gives a claimed job back without counting the attempt (stop()). */
  const release = (job: Job) => repo.releaseClaim(db, claimOf(job));

  function maybeCleanup() {
    const at = clock().getTime();
    if (at - lastCleanup < CLEANUP_EVERY_MS) return;
    lastCleanup = at;
    repo
      .deleteOldDoneJobs(db)
      .then((n) => {
        if (n > 0) logger.debug('deleted old done jobs', { count: n });
      })
      .catch((error: unknown) => logger.warn('job cleanup failed', { error: errorText(error) }));
  }

  // ---- running one claimed job -----------------------------------------------------------------------------

  const toJob = (row: repo.ClaimedRow): Job => ({ id: row.id, kind: row.kind, payload: row.payload, attempts: row.attempts, maxAttempts: row.max_attempts });

  function execute(claimed: repo.ClaimedRow[], table: Record<string, JobHandler>, leaseMs: number): Run {
    const jobs = claimed.map(toJob);
    const job = jobs[0]!;
    const run: Run = {
      job,
      jobs,
      controller: new AbortController(),
      timer: undefined,
      heartbeatInFlight: false,
      stopAborted: false,
      released: false,
      leaseLost: false,
      done: Promise.resolve(),
    };
    active.add(run);
    if (stopping) run.stopAborted = true;
    const batch = handlerOf(table, job.kind)?.batch;
    run.done = (batch ? runBatch(run, batch, leaseMs) : runJob(run, table, leaseMs)).finally(() => {
      if (run.timer) clearInterval(run.timer);
      active.delete(run);
    });
    return run;
  }

  async function heartbeat(run: Run, leaseMs: number): Promise<boolean> {
    if (run.released || run.leaseLost) return false;
    // A batch is one unit of work: losing any of its jobs stops it (the others are released afterwards).
    const stillOurs = run.jobs.length === 1 ? await extendLease(run.job, leaseMs) : (await extendLeases(run.jobs, leaseMs)).size === run.jobs.length;
    if (!stillOurs && !run.released) {
      run.leaseLost = true;
      logger.warn('job lease lost; aborting handler', { jobId: run.job.id, kind: run.job.kind, attempt: run.job.attempts });
      run.controller.abort(new Error('job lease lost'));
    }
    return stillOurs;
  }

  /** Renews the run's leases every third of a lease, one renewal in flight at a time. */
  function keepLeases(run: Run, leaseMs: number, fields: Record<string, unknown>) {
    run.timer = setInterval(
      () => {
        if (run.heartbeatInFlight) return;
        run.heartbeatInFlight = true;
        heartbeat(run, leaseMs)
          .catch((error: unknown) => logger.warn('job heartbeat failed', { ...fields, error: errorText(error) }))
          .finally(() => (run.heartbeatInFlight = false));
      },
      Math.max(1, Math.floor(leaseMs / 3)),
    );
  }

  async function runJob(run: Run, table: Record<string, JobHandler>, leaseMs: number): Promise<void> {
    const { job } = run;
    const fields = { jobId: job.id, kind: job.kind, attempt: job.attempts, maxAttempts: job.maxAttempts };
    try {
      if (run.stopAborted) {
        // Claimed while stop() was in progress: give it straight back.
        await release(job);
        return;
      }
      if (job.attempts > job.maxAttempts) {
        // Only reachable through an expired lease on the final attempt: the worker died while running it.
        const error = `lease expired during the final attempt (${job.maxAttempts}); the worker probably crashed`;
        logger.warn('job dead', { ...fields, error });
        await markDead(job, error);
        return;
      }
      const handler = handlerOf(table, job.kind);
      if (!handler) {
        const error = `no handler for kind ${job.kind}`;
        logger.warn('job dead', { ...fields, error });
        await markDead(job, error);
        return;
      }

      keepLeases(run, leaseMs, fields);

      const ctx: JobContext = {
        signal: run.controller.signal,
        heartbeat: async () => {
          if (!(await heartbeat(run, leaseMs))) throw new Error(`job ${job.id} is no longer held by this worker`);
        },
      };

      let failed = false;
      let failure: unknown;
      try {
        // .then() turns a synchronous throw into a rejection.
        await Promise.resolve().then(() => handler(job, ctx));
      } catch (error) {
        failed = true;
        failure = error;
      }
      clearInterval(run.timer);
      run.timer = undefined;

      if (run.released) return; // stop() already gave the job back
      if (run.leaseLost) {
        logger.warn('job finished after its lease was lost; result discarded', { ...fields, failed });
        return;
      }
      if (!failed) {
        if (!(await markDone(job))) logger.warn('job finished but was no longer held by this worker', fields);
        return;
      }
      await settleFailure(run, job, failure);
    } catch (error) {
      // A database error in the bookkeeping: the lease runs out and the job comes back by itself.
      logger.error('job bookkeeping failed', { ...fields, error: errorText(error) });
    }
  }

  const fieldsOf = (job: Job) => ({ jobId: job.id, kind: job.kind, attempt: job.attempts, maxAttempts: job.maxAttempts });

  /** A handler failed `job`: rescheduled, released (stop), dead or retried with backoff. */
  async function settleFailure(run: Run, job: Job, failure: unknown) {
    const fields = fieldsOf(job);
    if (failure instanceof RescheduleJob && !Number.isNaN(failure.runAt.getTime())) {
      await markRescheduled(job, errorText(failure), failure.runAt);
      return;
    }
    const error = errorText(failure);
    const permanent = failure instanceof PermanentJobError;
    if (run.stopAborted && !permanent && !(failure instanceof CountedAttemptError)) {
      logger.info('job interrupted by stop; released', { ...fields, error });
      await release(job);
      return;
    }
    if (permanent || job.attempts >= job.maxAttempts) {
      logger.warn('job failed; dead', { ...fields, error, permanent });
      await markDead(job, error);
      return;
    }
    let delay = 0;
    try {
      delay = backoff(job.attempts);
    } catch (e) {
      logger.warn('job backoff function threw', { ...fields, error: errorText(e) });
    }
    if (!Number.isFinite(delay) || delay < 0) delay = 0;
    logger.warn('job failed; will retry', { ...fields, error, retryInMs: Math.round(delay) });
    await markRetry(job, error, delay);
  }

  /** runJob for a batch handler: the same bookkeeping per job, with one statement for the lease and for done. */
  async function runBatch(run: Run, batch: BatchOptions, leaseMs: number): Promise<void> {
    const fields = { kind: run.job.kind, jobs: run.jobs.length };
    try {
      if (run.stopAborted) {
        for (const job of run.jobs) await release(job);
        return;
      }
      const live: Job[] = [];
      for (const job of run.jobs) {
        if (job.attempts <= job.maxAttempts) {
          live.push(job);
          continue;
        }
        const error = `lease expired during the final attempt (${job.maxAttempts}); the worker probably crashed`;
        logger.warn('job dead', { ...fieldsOf(job), error });
        await markDead(job, error);
      }
      if (live.length === 0) return;
      run.jobs = live;
      run.job = live[0]!;

      keepLeases(run, leaseMs, fields);
      const ctx: JobContext = {
        signal: run.controller.signal,
        heartbeat: async () => {
          if (!(await heartbeat(run, leaseMs))) throw new Error(`a job of this batch is no longer held by this worker`);
        },
      };

      let failures: Map<string, unknown>;
      try {
        failures = await Promise.resolve().then(() => batch.run(live, ctx));
      } catch (error) {
        failures = new Map(live.map((job) => [job.id, error]));
      }
      clearInterval(run.timer);
      run.timer = undefined;

      if (run.released) return;
      if (run.leaseLost) {
        // The jobs still ours go back without counting the attempt; the one taken over belongs to its new worker.
        logger.warn('batch stopped after a lease was lost; its other jobs released', fields);
        for (const job of live) await release(job);
        return;
      }
      const succeeded = live.filter((job) => !failures.has(job.id));
      const done = await repo.markAllDone(db, succeeded.map(claimOf));
      if (done.size < succeeded.length)
        logger.warn('batch finished but some jobs were no longer held by this worker', { ...fields, lost: succeeded.length - done.size });
      for (const job of live) if (failures.has(job.id)) await settleFailure(run, job, failures.get(job.id));
    } catch (error) {
      logger.error('job bookkeeping failed', { ...fields, error: errorText(error) });
    }
  }

  const handlerOf = (table: Record<string, JobHandler>, kind: string) =>
    Object.hasOwn(table, kind) && typeof table[kind] === 'function' ? table[kind] : undefined;

  /**
   * Claimed rows as units of work: one per job, except that jobs of a batch kind go together, topped up to the
   * batch size from the ready queue when the claim took all it asked for (more are probably waiting).
   */
  async function groupClaimed(rows: repo.ClaimedRow[], table: Record<string, JobHandler>, leaseMs: number, full: boolean): Promise<repo.ClaimedRow[][]> {
    const units: repo.ClaimedRow[][] = [];
    const batches = new Map<string, repo.ClaimedRow[]>();
    for (const row of rows) {
      if (!handlerOf(table, row.kind)?.batch) units.push([row]);
      else if (batches.has(row.kind)) batches.get(row.kind)!.push(row);
      else batches.set(row.kind, [row]);
    }
    for (const [kind, group] of batches) {
      const size = handlerOf(table, kind)!.batch!.size;
      if (full && group.length < size && !stopping) group.push(...(await claim(size - group.length, leaseMs, [kind])));
      for (let i = 0; i < group.length; i += size) units.push(group.slice(i, i + size));
    }
    return units;
  }

  // ---- poller ----------------------------------------------------------------------------------------------

  async function loop(table: Record<string, JobHandler>, opts: StartOptions): Promise<void> {
    while (!stopping) {
      maybeCleanup();
      const free = opts.concurrency - pollerRuns;
      if (free > 0) {
        let units: repo.ClaimedRow[][];
        let full: boolean;
        try {
          const rows = await claim(free, opts.leaseMs, opts.kinds);
          full = rows.length === free;
          units = await groupClaimed(rows, table, opts.leaseMs, full);
        } catch (error) {
          logger.error('job claim failed', { error: errorText(error) });
          await waitForWake(opts.pollIntervalMs);
          continue;
        }
        for (const unit of units) {
          pollerRuns++;
          void execute(unit, table, opts.leaseMs).done.finally(() => {
            pollerRuns--;
            wake();
          });
        }
        if (full) continue; // there may be more ready; the next pass waits if all slots are busy
      }
      await waitForWake(opts.pollIntervalMs);
    }
  }

  // ---- public API ------------------------------------------------------------------------------------------

  return {
    async enqueue(kind, payload, enqueueOptions = {}, executor = db) {
      const { runAt, maxAttempts, dedupeKey, fairKey } = enqueueOptions;
      if (maxAttempts !== undefined && !(Number.isInteger(maxAttempts) && maxAttempts >= 1)) {
        throw new RangeError(`maxAttempts must be a positive integer, got ${maxAttempts}`);
      }
      if (runAt !== undefined && Number.isNaN(runAt.getTime())) throw new RangeError('runAt is an invalid Date');
      const job: repo.NewJob = {
        id: randomUUID(),
        kind,
        payload: JSON.stringify(payload === undefined ? null : payload),
        runAt,
        maxAttempts,
        dedupeKey: dedupeKey ?? null,
        fairKey: fairKey ?? null,
      };
      if (dedupeKey === undefined) {
        await repo.insertJob(executor, job);
        return job.id;
      }
      for (let i = 0; i < 5; i++) {
        const inserted = await repo.insertDedupedJob(executor, job);
        if (inserted) return inserted;
        const existing = await repo.findActiveJobId(executor, dedupeKey);
        if (existing) return existing;
        // The conflicting job finished between the two statements: try the insert again.
      }
      throw new Error(`could not enqueue job with dedupe key ${dedupeKey}: conflicting job kept changing`);
    },

    start(startHandlers, startOptions = {}) {
      if (loopPromise) throw new Error('job queue already started');
      const concurrency = startOptions.concurrency ?? DEFAULT_CONCURRENCY;
      const pollIntervalMs = startOptions.pollIntervalMs ?? DEFAULT_POLL_INTERVAL_MS;
      const leaseMs = startOptions.leaseMs ?? DEFAULT_LEASE_MS;
      if (!(Number.isInteger(concurrency) && concurrency >= 1)) throw new RangeError('concurrency must be a positive integer');
      if (!(pollIntervalMs > 0)) throw new RangeError('pollIntervalMs must be positive');
      if (!(leaseMs >= 3)) throw new RangeError('leaseMs must be at least 3');
      const { perKeyLimit, fairKeyPrefix } = startOptions;
      if (fairKeyPrefix !== undefined && fairKeyPrefix.length === 0) throw new RangeError('fairKeyPrefix must not be empty');
      if (perKeyLimit !== undefined && !(Number.isInteger(perKeyLimit) && perKeyLimit >= 1)) throw new RangeError('perKeyLimit must be a positive integer');
      handlers = { ...startHandlers };
      options = {
        concurrency,
        pollIntervalMs,
        leaseMs,
        ...(startOptions.onlyHandledKinds ? { kinds: Object.keys(handlers) } : {}),
        ...(perKeyLimit !== undefined ? { perKeyLimit } : {}),
        ...(fairKeyPrefix !== undefined ? { fairKeyPrefix } : {}),
      };
      stopping = false;
      pendingWake = false;
      const table = handlers;
      const opts = options;
      loopPromise = loop(table, opts).catch((error: unknown) => logger.error('job poller crashed', { error: errorText(error) }));
      logger.info('job queue started', { workerId, ...opts, kinds: Object.keys(table) });
    },

    async stop(timeoutMs = DEFAULT_STOP_TIMEOUT_MS) {
      stopping = true;
      wake();
      for (const run of active) {
        run.stopAborted = true;
        run.controller.abort(new Error('job queue stopping'));
      }
      if (loopPromise) await loopPromise; // a claim in flight finishes; what it claimed is released at once
      loopPromise = undefined;
      const pending = [...active];
      for (const run of pending) {
        run.stopAborted = true;
        if (!run.controller.signal.aborted) run.controller.abort(new Error('job queue stopping'));
      }
      if (pending.length > 0) {
        let timer: ReturnType<typeof setTimeout> | undefined;
        const timeout = new Promise<void>((resolve) => (timer = setTimeout(resolve, Math.max(0, timeoutMs))));
        await Promise.race([Promise.allSettled(pending.map((r) => r.done)), timeout]);
        clearTimeout(timer);
      }
      for (const run of [...active]) {
        // The handler ignored the abort: give the job back now; its eventual outcome is ignored.
        run.released = true;
        if (run.timer) clearInterval(run.timer);
        run.timer = undefined;
        active.delete(run);
        try {
          for (const job of run.jobs) if (await release(job)) logger.warn('job handler did not stop in time; job released', { jobId: job.id, kind: job.kind });
        } catch (error) {
          logger.error('job release failed; it returns when its lease expires', { jobId: run.job.id, error: errorText(error) });
        }
      }
      pollerRuns = 0;
      waiter = undefined;
      pendingWake = false;
      stopping = false;
    },

    async drain(drainHandlers, drainOptions = {}) {
      const table = drainHandlers ?? handlers;
      const { concurrency, leaseMs } = options;
      const kinds = drainOptions.onlyHandledKinds ? Object.keys(table) : drainHandlers ? undefined : options.kinds;
      for (;;) {
        if (stopping) return;
        const rows = await claim(concurrency, leaseMs, kinds, true);
        if (rows.length === 0) return;
        const units = await groupClaimed(rows, table, leaseMs, rows.length === concurrency);
        await Promise.all(units.map((unit) => execute(unit, table, leaseMs).done));
      }
    },

    notify() {
      if (loopPromise) wake();
    },

    async stats(scope) {
      const row = await repo.jobStats(db, scope);
      return {
        queued: Number(row?.queued ?? 0),
        running: Number(row?.running ?? 0),
        dead: Number(row?.dead ?? 0),
        oldestQueuedAgeSeconds: row?.oldest == null ? null : Math.max(0, Number(row.oldest)),
      };
    },

    async cancel(field, values, executor = db) {
      if (values.length === 0) return;
      await repo.deleteActiveJobsByPayload(executor, field, values);
    },
  };
}
