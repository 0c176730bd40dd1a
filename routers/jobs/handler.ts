/**
 * What a job handler is: the job and context it is given, the batch form, and the errors it throws to steer the
 * queue (no retry, not due yet, an interrupted attempt that counts). A module that only handles jobs needs nothing else.
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
