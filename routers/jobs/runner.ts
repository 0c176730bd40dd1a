import type { Kysely } from 'kysely';
import type { DB } from '../../db/types.ts';
import type { Logger } from '../../adapters/outbound/logger.ts';
import type { BatchOptions, Job, JobContext, JobHandler } from './handler.ts';
import * as repo from './repository.ts';
import { errorText, fieldsOf, settleFailure } from './retry-policy.ts';

/**
 * Running claimed jobs (queue.ts claims them): each job's or batch's lease renewed while its handler runs, and its
 * outcome written back only while the claim is still ours.
 */

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

interface RunnerDeps {
  db: Kysely<DB>;
  logger: Logger;
  workerId: string;
  backoff: (attempt: number) => number;
  /** Claims more ready jobs, to top a batch up to its size. */
  claim: (limit: number, leaseMs: number, kinds?: string[]) => Promise<repo.ClaimedRow[]>;
  /** stop() is in progress: what is claimed now is given straight back. */
  stopping: () => boolean;
}

export function createRunner(deps: RunnerDeps) {
  const { db, logger, workerId, backoff } = deps;
  /** The runs in progress, for stop() to abort and release. */
  const active = new Set<Run>();

  const claimOf = (job: Job): repo.Claim => ({ id: job.id, attempts: job.attempts, workerId });
  const extendLease = (job: Job, leaseMs: number) => repo.extendLease(db, claimOf(job), leaseMs);
  const extendLeases = (jobs: Job[], leaseMs: number) => repo.extendLeases(db, jobs.map(claimOf), leaseMs);
  const markDone = (job: Job) => repo.markDone(db, claimOf(job));
  const markDead = (job: Job, error: string) => repo.markDead(db, claimOf(job), error);
  const markRetry = (job: Job, error: string, delayMs: number) => repo.markRetry(db, claimOf(job), error, delayMs);
  const markRescheduled = (job: Job, note: string, runAt: Date) => repo.markRescheduled(db, claimOf(job), note, runAt);
  /** Gives a claimed job back without counting the attempt (stop()). */
  const release = (job: Job) => repo.releaseClaim(db, claimOf(job));
  const settle = { logger, backoff, markRescheduled, release, markDead, markRetry };

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
    if (deps.stopping()) run.stopAborted = true;
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
      await settleFailure(settle, job, failure, run.stopAborted);
    } catch (error) {
      // A database error in the bookkeeping: the lease runs out and the job comes back by itself.
      logger.error('job bookkeeping failed', { ...fields, error: errorText(error) });
    }
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
      for (const job of live) if (failures.has(job.id)) await settleFailure(settle, job, failures.get(job.id), run.stopAborted);
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
      if (full && group.length < size && !deps.stopping()) group.push(...(await deps.claim(size - group.length, leaseMs, [kind])));
      for (let i = 0; i < group.length; i += size) units.push(group.slice(i, i + size));
    }
    return units;
  }

  return { active, execute, groupClaimed, release };
}
