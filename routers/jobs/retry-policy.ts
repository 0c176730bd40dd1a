import type { Logger } from '../../adapters/outbound/logger.ts';
import { CountedAttemptError, type Job, PermanentJobError, RescheduleJob } from './handler.ts';
import { toStorable } from '../../schema/text-input.ts';

/**
 * What becomes of a failed attempt: rescheduled (the handler said when), given back (stop() interrupted it), dead
 * (permanent, or out of attempts) or retried after a backoff; and the error text kept for it.
 */

const MAX_ERROR_LENGTH = 4_000;

/** 2^attempt seconds, capped at 10 minutes, ± 20 % jitter. */
export function defaultBackoff(attempt: number): number {
  const base = Math.min(2 ** Math.max(0, attempt) * 1_000, 10 * 60_000);
  return Math.round(base * (0.8 + Math.random() * 0.4));
}

/**
 * A failure as written to last_error and the logs: capped and storable, whatever the handler threw (a message may
 * quote a mail server's or a provider's reply, NUL included, and a refused write left the job running).
 */
export function errorText(error: unknown): string {
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
  return toStorable(text.length > MAX_ERROR_LENGTH ? text.slice(0, MAX_ERROR_LENGTH) + '…' : text);
}

export const fieldsOf = (job: Job) => ({ jobId: job.id, kind: job.kind, attempt: job.attempts, maxAttempts: job.maxAttempts });

/** The writes that settle a failed claim (each answers whether the claim was still ours). */
interface FailureDeps {
  logger: Logger;
  backoff: (attempt: number) => number;
  markRescheduled(job: Job, note: string, runAt: Date): Promise<boolean>;
  release(job: Job): Promise<boolean>;
  markDead(job: Job, error: string): Promise<boolean>;
  markRetry(job: Job, error: string, delayMs: number): Promise<boolean>;
}

/** A handler failed `job`: rescheduled, released (stop), dead or retried with backoff. */
export async function settleFailure(deps: FailureDeps, job: Job, failure: unknown, stopAborted: boolean) {
  const { logger, backoff } = deps;
  const fields = fieldsOf(job);
  if (failure instanceof RescheduleJob && !Number.isNaN(failure.runAt.getTime())) {
    await deps.markRescheduled(job, errorText(failure), failure.runAt);
    return;
  }
  const error = errorText(failure);
  const permanent = failure instanceof PermanentJobError;
  if (stopAborted && !permanent && !(failure instanceof CountedAttemptError)) {
    logger.info('job interrupted by stop; released', { ...fields, error });
    await deps.release(job);
    return;
  }
  if (permanent || job.attempts >= job.maxAttempts) {
    logger.warn('job failed; dead', { ...fields, error, permanent });
    await deps.markDead(job, error);
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
  await deps.markRetry(job, error, delay);
}
