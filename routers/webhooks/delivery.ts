import type { Readable } from 'node:stream';
import { countWebhookAttempt } from '../dashboard/repository.ts';
import type { Kysely } from 'kysely';
import type { DB, WebhookAttempt, WebhookDeliveryRow } from '../../db/types.ts';
import type { GuardedHttpClient } from '../../adapters/outbound/http/guarded-client.ts';
import type { SecretBox } from '../../adapters/outbound/secrets.ts';
import type { Logger } from '../../adapters/outbound/logger.ts';
import { RescheduleJob, type Job, type JobHandler } from '../jobs/handler.ts';
import type { JobQueue } from '../jobs/queue.ts';
import { signatureHeader } from './signing.ts';
import { toStorable } from '../../schema/text-input.ts';
import { nextAttemptDelay, parseRetryAfter } from './schedule.ts';
import { recordEvents, webhookEvent } from './outbox.ts';
import { DELIVER_JOB } from './outbox-repository.ts';
import * as repo from './repository.ts';
import { usesHttps } from './url-policy.ts';
import { PLAN_RULES } from '../../schema/plans.ts';

export const REPLAY_JOB = 'webhook.replay';
/** An endpoint that has not succeeded once in this long is disabled. */
export const FAILING_DISABLE_AFTER_MS = 5 * 24 * 3_600_000;
const EXCERPT_CHARS = 500;
const NOT_DUE_MAX_EXTRA_WAIT_MS = 60_000;
/** Response bytes read for the excerpt; a longer body is cut off and its connection closed. */
const READ_LIMIT_BYTES = 16 * 1024;

export interface DeliveryDeps {
  db: Kysely<DB>;
  http: GuardedHttpClient;
  secrets: SecretBox;
  logger: Logger;
  jobs: Pick<JobQueue, 'notify'>;
  /** Per attempt, connect to the end of the response. */
  timeoutMs: number;
  /** Told of every attempt's outcome (the metrics). */
  onOutcome?: (succeeded: boolean) => void;
  /** The clock of the retry schedule, signatures and the failure streak (tests control it). */
  now: () => Date;
}

interface AttemptResult {
  attempt: WebhookAttempt;
  succeeded: boolean;
  retryAfterMs: number | undefined;
}

async function readExcerpt(body: Readable): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of body) {
      chunks.push(chunk as Buffer);
      size += (chunk as Buffer).length;
      if (size >= READ_LIMIT_BYTES) break; // leaving the loop destroys the stream (and its socket)
    }
  } catch {
    // The status is what counts; a body cut off mid-way still leaves an excerpt.
  }
  // Cut between characters, not inside a surrogate pair, and without NUL: the attempt is stored as jsonb, which
  // refuses both, and a refused record left the delivery pending with every retry sending the event again.
  const excerpt = Buffer.concat(chunks).toString('utf8').slice(0, EXCERPT_CHARS);
  const last = excerpt.charCodeAt(excerpt.length - 1);
  return toStorable(last >= 0xd800 && last <= 0xdbff ? excerpt.slice(0, -1) : excerpt);
}

/**
 * Why a delivery is not sent now, whatever its schedule: an endpoint that is disabled receives nothing but the test
 * event its owner asked for, and an owner moved off the enterprise plan receives nothing until the plan is back.
 */
function notSendable(delivery: repo.DeliveryForSend): string | undefined {
  if (!PLAN_RULES[delivery.owner_plan].enterpriseWebhooks) return 'Not sent: the account is no longer on the enterprise plan';
  if (!delivery.enabled && delivery.event_type !== 'webhook.test') return 'Not sent: the endpoint is disabled';
  return undefined;
}

/** Records an attempt that was not made, ending the delivery's automatic retries (a replay may still be asked for). */
function recordNotSent(deps: DeliveryDeps, delivery: repo.DeliveryForSend, trigger: WebhookAttempt['trigger'], error: string) {
  const attempt: WebhookAttempt = { at: deps.now().toISOString(), trigger, httpStatus: null, latencyMs: 0, responseExcerpt: null, error };
  return repo.saveAttempt(deps.db, delivery.id, {
    status: trigger === 'replay' ? 'keep' : 'failed',
    countsAsAutomatic: false,
    nextAttemptAt: null,
    attempt,
  });
}

/**
 * Sends one delivery attempt. Never throws for the receiver's behaviour: every outcome becomes an attempt
 * record. `webhook-id` is the event id, identical on every retry and replay, so receivers can deduplicate.
 */
async function send(deps: DeliveryDeps, delivery: repo.DeliveryForSend, trigger: WebhookAttempt['trigger']): Promise<AttemptResult> {
  const at = deps.now();
  const secrets = [deps.secrets.open(delivery.secret_enc)];
  if (delivery.previous_secret_enc && delivery.previous_secret_expires_at && new Date(delivery.previous_secret_expires_at) > at) {
    secrets.push(deps.secrets.open(delivery.previous_secret_enc));
  }
  const timestamp = Math.floor(at.getTime() / 1000);
  const headers = {
    'content-type': 'application/json',
    'webhook-id': delivery.event_id,
    'webhook-timestamp': String(timestamp),
    'webhook-signature': signatureHeader(secrets, delivery.event_id, timestamp, delivery.body),
  };
  const started = performance.now();
  const base = { at: at.toISOString(), trigger };
  // Plain http was accepted for an OUTBOUND_ALLOW_HOSTS entry only; that entry may be gone since it was saved.
  // The scheme is read as URL parses it: a URL saved as `HTTPS://...` is https.
  if (!usesHttps(delivery.url) && !deps.http.isAllowListed(delivery.url)) {
    return {
      attempt: { ...base, httpStatus: null, latencyMs: 0, responseExcerpt: null, error: 'Not sent: plain http is not allowed for this URL; use https' },
      succeeded: false,
      retryAfterMs: undefined,
    };
  }
  try {
    const response = await deps.http.stream(delivery.url, { method: 'POST', headers, body: delivery.body, timeoutMs: deps.timeoutMs });
    const excerpt = await readExcerpt(response.body);
    const latencyMs = Math.round((performance.now() - started) * 10) / 10;
    const succeeded = response.status >= 200 && response.status < 300;
    const error = succeeded
      ? null
      : response.status >= 300 && response.status < 400
        ? `Redirect (${response.status}) not followed: configure the final URL`
        : `Receiver answered ${response.status}`;
    return {
      attempt: { ...base, httpStatus: response.status, latencyMs, responseExcerpt: excerpt, error },
      succeeded,
      retryAfterMs: parseRetryAfter(response.headers['retry-after'], at),
    };
  } catch (error) {
    const latencyMs = Math.round((performance.now() - started) * 10) / 10;
    return {
      attempt: { ...base, httpStatus: null, latencyMs, responseExcerpt: null, error: (error as Error).message || 'request failed' },
      succeeded: false,
      retryAfterMs: undefined,
    };
  }
}

/**
 * Writes the attempt and its consequences in one transaction: the delivery's status and next attempt, the
 * endpoint's failure streak, and — on a 410 or five days of failures — disabling the endpoint, which is
 * itself recorded (disabledReason/disabledAt, and a `webhook.disabled` event to the owner's other endpoints).
 */
async function record(
  deps: DeliveryDeps,
  delivery: repo.DeliveryForSend,
  result: AttemptResult,
  next: { status: WebhookDeliveryRow['status'] | 'keep'; nextAttemptAt: Date | null; automatic: boolean },
) {
  const at = new Date(result.attempt.at);
  deps.onOutcome?.(result.succeeded);
  let queued = 0;
  const stored = await deps.db.transaction().execute(async (trx) => {
    // The endpoint's row is locked before the delivery's: deleting an endpoint locks it and then (cascading) its
    // deliveries, and the opposite order deadlocked with it on PostgreSQL (the delete answered 500).
    const endpoint = await repo.recordEndpointOutcome(trx, delivery.webhook_id, result.succeeded, at);
    const saved = await repo.saveAttempt(trx, delivery.id, {
      status: next.status,
      countsAsAutomatic: next.automatic,
      nextAttemptAt: next.nextAttemptAt,
      attempt: result.attempt,
    });
    await countWebhookAttempt(trx, delivery.webhook_id, result.succeeded);
    if (!endpoint?.enabled) return saved;
    let reason: 'gone' | 'failing' | undefined;
    if (result.attempt.httpStatus === 410) reason = 'gone';
    else if (endpoint.failing_since && at.getTime() - new Date(endpoint.failing_since).getTime() >= FAILING_DISABLE_AFTER_MS) reason = 'failing';
    if (!reason) return saved;
    const disabled = await repo.disableEndpoint(trx, delivery.webhook_id, reason, at);
    if (!disabled) return saved;
    const message = reason === 'gone' ? 'The receiver answered 410 Gone' : 'No successful delivery for 5 days';
    deps.logger.warn('webhook endpoint disabled', { webhookId: disabled.id, reason });
    queued = (await recordEvents(trx, [webhookEvent(disabled.owner_id, 'webhook.disabled', { webhookId: disabled.id, url: disabled.url, reason, message })]))
      .queued;
    return saved;
  });
  if (queued > 0) deps.jobs.notify();
  return stored;
}

/** The automatic delivery job: one attempt per run, rescheduling itself along schedule.ts until done. */
async function deliver(deps: DeliveryDeps, job: Job<{ deliveryId: string }>): Promise<void> {
  const delivery = await repo.loadDeliveryForSend(deps.db, job.payload.deliveryId);
  if (!delivery) return; // the endpoint (and with it the delivery) was deleted
  if (delivery.status === 'succeeded' || delivery.status === 'exhausted') return;
  // Claimed before its attempt is due by our clock: after a crash between recording and rescheduling, or when
  // this process's clock is behind the database's (which decides claims). Waiting as long again as is missing,
  // up to a minute, makes it due without spinning through claims.
  const now = deps.now().getTime();
  if (delivery.next_attempt_at && new Date(delivery.next_attempt_at).getTime() > now) {
    const due = new Date(delivery.next_attempt_at).getTime();
    throw new RescheduleJob(new Date(due + Math.min(due - now, NOT_DUE_MAX_EXTRA_WAIT_MS)), 'not due yet');
  }
  if (delivery.next_attempt_at === null && delivery.status === 'failed') return; // stopped earlier (endpoint disabled)

  const refusal = notSendable(delivery);
  if (refusal) {
    await recordNotSent(deps, delivery, 'automatic', refusal);
    return;
  }

  // Not aborted by a graceful stop: an attempt in flight (bounded by its timeout) finishes and is recorded, so
  // a restart does not send it again. The queue's stop() waits for it.
  const result = await send(deps, delivery, 'automatic');
  const attemptsMade = delivery.attempt_count + 1;
  if (result.succeeded) {
    await record(deps, delivery, result, { status: 'succeeded', nextAttemptAt: null, automatic: true });
    return;
  }
  const delay = result.attempt.httpStatus === 410 ? undefined : nextAttemptDelay(attemptsMade, result.retryAfterMs);
  const nextAttemptAt = delay === undefined ? null : new Date(new Date(result.attempt.at).getTime() + delay);
  const status = delay === undefined && result.attempt.httpStatus !== 410 ? 'exhausted' : 'failed';
  const stored = await record(deps, delivery, result, { status, nextAttemptAt, automatic: true });
  // A replay that succeeded meanwhile ended the delivery: nothing more to schedule.
  if (stored?.next_attempt_at) throw new RescheduleJob(new Date(stored.next_attempt_at), `attempt ${attemptsMade} failed: ${result.attempt.error}`);
}

/** A replay: one immediate attempt of a failed delivery, with the same event id and body. */
async function replay(deps: DeliveryDeps, job: Job<{ deliveryId: string }>): Promise<void> {
  const delivery = await repo.loadDeliveryForSend(deps.db, job.payload.deliveryId);
  if (!delivery || delivery.status === 'succeeded') return;
  // The route refuses these; the endpoint or the plan may have changed while the replay waited in the queue.
  const refusal = notSendable(delivery);
  if (refusal) {
    await recordNotSent(deps, delivery, 'replay', refusal);
    return;
  }
  const result = await send(deps, delivery, 'replay');
  // A failed replay leaves the delivery's status and automatic schedule (if any) as they are by then.
  await record(deps, delivery, result, { status: result.succeeded ? 'succeeded' : 'keep', nextAttemptAt: null, automatic: false });
}

/**
 * How many of an instance's delivery workers one owner's deliveries may hold at once: as configured (never more
 * than there are), or all but a quarter, at least one kept back when there are two or more (6 of 8). What is kept
 * back serves the other owners while one owner's endpoint answers only at the deadline; a lone owner's burst
 * still gets most of the workers.
 */
export function webhookWorkersPerOwner(workers: number, configured: number | undefined): number {
  if (configured !== undefined) return Math.max(1, Math.min(workers, configured));
  return workers <= 1 ? 1 : workers - Math.max(1, Math.floor(workers / 4));
}

export function webhookJobHandlers(deps: DeliveryDeps): Record<string, JobHandler> {
  return {
    [DELIVER_JOB]: (job) => deliver(deps, job as Job<{ deliveryId: string }>),
    [REPLAY_JOB]: (job) => replay(deps, job as Job<{ deliveryId: string }>),
  };
}
