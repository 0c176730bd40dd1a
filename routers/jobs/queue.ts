import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type { Kysely, Transaction } from 'kysely';
import type { DB } from '../../db/types.ts';
import type { Logger } from '../../adapters/outbound/logger.ts';
import type { JobHandler } from './handler.ts';
import * as repo from './repository.ts';
import { defaultBackoff, errorText } from './retry-policy.ts';
import { createRunner } from './runner.ts';

/**
 * A durable job queue on the `jobs` table (db/migrations/0002_knowledge_base.ts); its SQL is in repository.ts, what a
 * handler sees in handler.ts, running a claimed job in runner.ts, and what a failure leads to in retry-policy.ts.
 *
 * Jobs are claimed in one short UPDATE … WHERE id IN (SELECT … FOR UPDATE SKIP LOCKED) statement that sets a
 * lease; the lease is renewed while the handler runs and a job whose lease expires (a crashed worker) becomes
 * claimable again, its attempt counted. No transaction is ever held open while a handler runs (PGlite is one
 * connection). All times that matter — run_at, lease_until — are computed by the database (now()), never by the
 * process clock. A claim is identified by (locked_by, attempts): every later write for that claim (heartbeat,
 * done, retry, dead, release) is conditional on both, so a worker that lost its lease can never overwrite the
 * state written by the worker that took the job over.
 */

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
  const { active, execute, groupClaimed, release } = createRunner({ db, logger, workerId, backoff, claim, stopping: () => stopping });

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
