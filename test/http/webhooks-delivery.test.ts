// Enterprise webhooks, delivery over time: the retry schedule, what counts as a failure, Retry-After, disabling
// (410 Gone, five days of failures), the per-attempt timeout and the end of the secret rotation grace period.
//
// The app runs with WEBHOOK_CONCURRENCY=0, so nothing delivers on its own: each test drives the real delivery
// handlers through its own job queue on the same database, with a clock it controls, against a real local
// receiver. The queue claims by the database clock (run_at <= now()) while the handlers schedule by the fake
// clock, so the fake clock starts 30 days in the past: every run_at it produces is already claimable, and
// whether an attempt is made is decided by the handler against the fake clock alone.
import { createHmac } from 'node:crypto';
import { sql } from 'kysely';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { z } from 'zod';
import type { webhookDeliverySchema } from '../../schema/webhooks.ts';
import { createLogger } from '../../adapters/outbound/logger.ts';
import { RescheduleJob, type JobHandler } from '../../routers/jobs/handler.ts';
import { createJobQueue, type JobQueue } from '../../routers/jobs/queue.ts';
import { webhookJobHandlers } from '../../routers/webhooks/delivery.ts';
import { DELIVER_JOB } from '../../routers/webhooks/outbox-repository.ts';
import { generateSecret } from '../../routers/webhooks/signing.ts';
import { startTestApp, type TestApp } from '../helpers/test-app.ts';
import { startWebhookReceiver, verifyDelivery, type ReceivedWebhook, type WebhookReceiver } from '../helpers/webhook-receiver.ts';

const SECOND = 1_000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;
/** The documented schedule: the delay after attempt n (±10 % jitter). */
const DELAYS = [5 * SECOND, 5 * MINUTE, 30 * MINUTE, 2 * HOUR, 5 * HOUR, 10 * HOUR, 10 * HOUR];
const base = '/api/v1/enterprise/webhooks';

type Delivery = z.infer<typeof webhookDeliverySchema>;

interface Hook {
  id: string;
  url: string;
  secret: string;
}

let app: TestApp;
let receiver: WebhookReceiver;
/** A second receiver, for the owner's other endpoint. */
let other: WebhookReceiver;
let owner: { token: string; ownerId: string };
let queue: JobQueue;
let handlers: Record<string, JobHandler>;
/** The clock of the delivery handlers (schedule, signatures, failure streak). */
let clock: Date;

/** 30 days ago, on a whole second. */
const pastStart = () => new Date(Math.floor((Date.now() - 30 * DAY) / SECOND) * SECOND);
const at = (ms: number) => new Date(clock.getTime() + ms);
const payload = (r: ReceivedWebhook) => JSON.parse(r.body) as { id: string; type: string; timestamp: string; data: any };

/** A Standard Webhooks signature computed here, for timestamps the library would refuse as too old or too new. */
function hmacSignature(secret: string, id: string, timestamp: string, body: string) {
  return (
    'v1,' +
    createHmac('sha256', Buffer.from(secret.slice('whsec_'.length), 'base64'))
      .update(`${id}.${timestamp}.${body}`)
      .digest('base64')
  );
}

function signaturesOf(r: ReceivedWebhook): string[] {
  return String(r.headers['webhook-signature'] ?? '').split(' ');
}

/** Checks a request's signature by hand against `secret` (one of its signatures must match). */
function expectSignedWith(secret: string, r: ReceivedWebhook) {
  const expected = hmacSignature(secret, String(r.headers['webhook-id']), String(r.headers['webhook-timestamp']), r.body);
  expect(signaturesOf(r)).toContain(expected);
}

const PARKED_AT = new Date('2999-01-01T00:00:00.000Z');

/**
 * Runs every webhook job that is ready, each at most once, like workers reaching the due jobs at this moment.
 * (queue.drain alone would run a job rescheduled to a time already past for the database again and again: a
 * job not due on the fake clock puts itself back for a run_at in the real past.) A job claimed a second time
 * is parked for the rest of this drain and afterwards given back the run_at and note its own handler wrote.
 */
async function drainDue() {
  const db = app.deps.database.db;
  const ran = new Set<string>();
  const parked = new Map<string, { run_at: Date; last_error: string | null }>();
  const wrapped: Record<string, JobHandler> = {};
  for (const [kind, handler] of Object.entries(handlers)) {
    wrapped[kind] = async (job, ctx) => {
      if (ran.has(job.id)) {
        // Claiming does not change run_at and last_error: they are what this drain's run of the handler left.
        const row = await db.selectFrom('jobs').select(['run_at', 'last_error']).where('id', '=', job.id).executeTakeFirstOrThrow();
        parked.set(job.id, { run_at: new Date(row.run_at), last_error: row.last_error });
        throw new RescheduleJob(PARKED_AT, 'parked until the next drain');
      }
      ran.add(job.id);
      await handler(job, ctx);
    };
  }
  await queue.drain(wrapped, { onlyHandledKinds: true });
  for (const [id, row] of parked) {
    await db.updateTable('jobs').set(row).where('id', '=', id).where('status', '=', 'queued').where('run_at', '=', PARKED_AT).execute();
  }
}

async function createHook(body: Record<string, unknown>): Promise<Hook> {
  const res = await app.request('POST', base, { token: owner.token, body });
  expect(res.status, res.text).toBe(201);
  return { id: res.body.data.webhook.id, url: res.body.data.webhook.url, secret: res.body.data.secret };
}

async function getHook(id: string) {
  const res = await app.request('GET', `${base}/${id}`, { token: owner.token });
  expect(res.status, res.text).toBe(200);
  return res.body.data.webhook as {
    enabled: boolean;
    disabledReason: string | null;
    disabledAt: string | null;
    failingSince: string | null;
    stats: { lastSuccessAt: string | null };
  };
}

async function deliveriesOf(hookId: string): Promise<Delivery[]> {
  const res = await app.request('GET', `${base}/${hookId}/deliveries?limit=100`, { token: owner.token });
  expect(res.status, res.text).toBe(200);
  return res.body.data.deliveries;
}

async function delivery(hookId: string, deliveryId: string): Promise<Delivery> {
  const found = (await deliveriesOf(hookId)).find((d) => d.deliveryId === deliveryId);
  if (!found) throw new Error(`no delivery ${deliveryId} on ${hookId}`);
  return found;
}

async function sendTest(hookId: string): Promise<string> {
  const res = await app.request('POST', `${base}/${hookId}/test`, { token: owner.token, body: {} });
  expect(res.status, res.text).toBe(200);
  return res.body.deliveryId as string;
}

/** Creates a knowledge base (a knowledge_base.created event) and returns the delivery it caused on `hookId`. */
async function createKnowledgeBase(hookId: string, name: string): Promise<Delivery> {
  const before = new Set((await deliveriesOf(hookId)).map((d) => d.deliveryId));
  const res = await app.request('POST', '/api/v1/knowledge-base/configs', { token: owner.token, body: { name } });
  expect(res.status, res.text).toBe(201);
  const added = (await deliveriesOf(hookId)).filter((d) => !before.has(d.deliveryId));
  expect(added).toHaveLength(1);
  expect(added[0]).toMatchObject({ eventType: 'knowledge_base.created', status: 'pending', attemptCount: 0 });
  return added[0]!;
}

async function jobOf(deliveryId: string) {
  return app.deps.database.db
    .selectFrom('jobs')
    .select(['status', 'attempts', 'run_at', 'last_error'])
    .where('kind', '=', DELIVER_JOB)
    .where(sql<string>`payload->>'deliveryId'`, '=', deliveryId)
    .executeTakeFirstOrThrow();
}

beforeAll(async () => {
  receiver = await startWebhookReceiver();
  other = await startWebhookReceiver('/other');
  app = await startTestApp({
    OUTBOUND_ALLOW_HOSTS: `${receiver.hostPort},${other.hostPort}`,
    WEBHOOK_CONCURRENCY: '0',
    WEBHOOK_TIMEOUT_MS: '500',
    RATE_LIMIT_DEFAULT: '1000',
  });
  owner = await app.signUp('wh-delivery');
  await app.deps.database.db.updateTable('owners').set({ plan: 'enterprise' }).where('id', '=', owner.ownerId).execute();
  const logger = createLogger('error');
  const db = app.deps.database.db;
  queue = createJobQueue({ db, logger });
  handlers = webhookJobHandlers({ db, http: app.deps.http, secrets: app.deps.secrets, logger, jobs: { notify() {} }, timeoutMs: 500, now: () => clock });
});

beforeEach(() => {
  clock = pastStart();
  for (const r of [receiver, other]) {
    r.received.length = 0;
    r.reply = () => ({});
  }
});

afterEach(async () => {
  // Deleting the endpoints deletes their deliveries; their jobs then end at their next run.
  const res = await app.request('GET', base, { token: owner.token });
  for (const hook of res.body.data.webhooks as Array<{ id: string }>) await app.request('DELETE', `${base}/${hook.id}`, { token: owner.token });
});

afterAll(async () => {
  await queue?.stop();
  await app?.stop();
  await receiver?.close();
  await other?.close();
});

describe('retry schedule', () => {
  it('a receiver answering 500 gets exactly 8 attempts on the schedule, over more than 24 h, then the delivery is exhausted', async () => {
    receiver.reply = () => ({ status: 500, body: 'down' });
    const hook = await createHook({ url: receiver.url, events: ['webhook.test'] });
    const deliveryId = await sendTest(hook.id);
    expect(await delivery(hook.id, deliveryId)).toMatchObject({ status: 'pending', attemptCount: 0, attempts: [], nextAttemptAt: null });

    await drainDue();
    expect(receiver.received).toHaveLength(1);
    let d = await delivery(hook.id, deliveryId);
    expect(d).toMatchObject({ status: 'failed', attemptCount: 1, lastHttpStatus: 500 });
    expect(d.attempts).toEqual([
      {
        at: clock.toISOString(),
        trigger: 'automatic',
        httpStatus: 500,
        latencyMs: expect.any(Number),
        responseExcerpt: 'down',
        error: 'Receiver answered 500',
      },
    ]);
    expect(d.nextAttemptAt).not.toBeNull();
    // The job waits for the next attempt: run_at is the delivery's next attempt, and no job attempt was used up.
    let job = await jobOf(deliveryId);
    expect(job).toMatchObject({ status: 'queued', attempts: 0, last_error: 'attempt 1 failed: Receiver answered 500' });
    expect(new Date(job.run_at).toISOString()).toBe(d.nextAttemptAt);

    // Not due yet by our clock (it has not moved, then 1 ms short) although the database let the job be claimed:
    // nothing is sent, and the job waits as long again as is missing (at most a minute), so it cannot spin.
    for (const notYet of [clock, new Date(Date.parse(d.nextAttemptAt!) - 1)]) {
      clock = notYet;
      await drainDue();
      expect(receiver.received).toHaveLength(1);
      expect(await delivery(hook.id, deliveryId)).toEqual(d);
      job = await jobOf(deliveryId);
      expect(job).toMatchObject({ status: 'queued', attempts: 0, last_error: 'not due yet' });
      const missing = Date.parse(d.nextAttemptAt!) - notYet.getTime();
      expect(new Date(job.run_at).getTime()).toBe(Date.parse(d.nextAttemptAt!) + Math.min(missing, 60_000));
    }

    for (let n = 2; n <= 8; n++) {
      expect(d.status).toBe('failed');
      expect(d.nextAttemptAt).not.toBeNull();
      clock = new Date(d.nextAttemptAt!);
      await drainDue();
      expect(receiver.received).toHaveLength(n);
      d = await delivery(hook.id, deliveryId);
      expect(d.attemptCount).toBe(n);
      expect(d.attempts).toHaveLength(n);
      expect(d.attempts[n - 1]).toMatchObject({ at: clock.toISOString(), trigger: 'automatic', httpStatus: 500, error: 'Receiver answered 500' });
      if (n < 8) expect(new Date((await jobOf(deliveryId)).run_at).toISOString()).toBe(d.nextAttemptAt);
    }
    expect(d).toMatchObject({ status: 'exhausted', attemptCount: 8, nextAttemptAt: null, lastHttpStatus: 500 });
    expect((await jobOf(deliveryId)).status).toBe('done');

    const times = d.attempts.map((a) => Date.parse(a.at));
    DELAYS.forEach((delay, i) => {
      const gap = times[i + 1]! - times[i]!;
      expect(gap, `gap after attempt ${i + 1}`).toBeGreaterThanOrEqual(Math.round(delay * 0.9));
      expect(gap, `gap after attempt ${i + 1}`).toBeLessThanOrEqual(Math.round(delay * 1.1));
    });
    expect(times[7]! - times[0]!).toBeGreaterThanOrEqual(24 * HOUR);

    // Much later, still nothing more.
    clock = at(3 * DAY);
    await drainDue();
    expect(receiver.received).toHaveLength(8);
    expect(await delivery(hook.id, deliveryId)).toEqual(d);

    // Every attempt is the same event: same webhook-id, the same bytes; each signed at its own attempt time.
    for (const [i, request] of receiver.received.entries()) {
      expect(request.headers['webhook-id']).toBe(d.eventId);
      expect(request.body).toBe(receiver.received[0]!.body);
      expect(request.headers['webhook-timestamp']).toBe(String(Math.floor(times[i]! / 1000)));
      expectSignedWith(hook.secret, request);
    }
    expect(payload(receiver.received[0]!)).toMatchObject({ id: d.eventId, type: 'webhook.test', data: { webhookId: hook.id } });
  });

  it('a redirect is a failed attempt and is not followed', async () => {
    const hook = await createHook({ url: receiver.url, events: ['webhook.test'] });
    const start = clock;
    receiver.reply = () => ({ status: 302, headers: { location: 'http://169.254.169.254/latest/meta-data/' } });
    const first = await sendTest(hook.id);
    await drainDue();
    // A 307 keeps the method: if it were followed, the receiver would see a second POST.
    receiver.reply = () => (receiver.received.length === 2 ? { status: 307, headers: { location: `${receiver.url}/followed` } } : {});
    const second = await sendTest(hook.id);
    await drainDue();
    expect(receiver.received).toHaveLength(2);

    for (const [id, status] of [
      [first, 302],
      [second, 307],
    ] as const) {
      const d = await delivery(hook.id, id);
      expect(d).toMatchObject({ status: 'failed', attemptCount: 1, lastHttpStatus: status });
      expect(d.attempts[0]).toMatchObject({ httpStatus: status, error: expect.stringMatching(/redirect.*not followed/i) });
      const retryIn = Date.parse(d.nextAttemptAt!) - Date.parse(d.attempts[0]!.at);
      expect(retryIn).toBeGreaterThanOrEqual(4_500);
      expect(retryIn).toBeLessThanOrEqual(5_500);
    }
    expect(await getHook(hook.id)).toMatchObject({ enabled: true, failingSince: start.toISOString() });
  });

  it('the per-attempt timeout: a receiver slower than WEBHOOK_TIMEOUT_MS is a failed attempt without a status', async () => {
    receiver.reply = () => ({ status: 200, body: 'too late', delayMs: 2_000 });
    const hook = await createHook({ url: receiver.url, events: ['webhook.test'] });
    const deliveryId = await sendTest(hook.id);
    await drainDue();
    expect(receiver.received).toHaveLength(1);
    const d = await delivery(hook.id, deliveryId);
    expect(d).toMatchObject({ status: 'failed', attemptCount: 1, lastHttpStatus: null });
    expect(d.attempts[0]).toMatchObject({
      at: clock.toISOString(),
      httpStatus: null,
      responseExcerpt: null,
      error: expect.stringMatching(/timed out after 500 ms/),
    });
    expect(d.nextAttemptAt).not.toBeNull();
    expect(await getHook(hook.id)).toMatchObject({ enabled: true, failingSince: clock.toISOString() });
  });
});

describe('Retry-After', () => {
  it('in seconds: the next attempt waits at least that long instead of about 5 s', async () => {
    receiver.reply = () => ({ status: 429, headers: { 'retry-after': '120' }, body: 'slow down' });
    const hook = await createHook({ url: receiver.url, events: ['webhook.test'] });
    const deliveryId = await sendTest(hook.id);
    await drainDue();
    let d = await delivery(hook.id, deliveryId);
    expect(d).toMatchObject({ status: 'failed', lastHttpStatus: 429 });
    expect(d.attempts[0]).toMatchObject({ httpStatus: 429, error: 'Receiver answered 429' });
    const wait = Date.parse(d.nextAttemptAt!) - Date.parse(d.attempts[0]!.at);
    expect(wait).toBeGreaterThanOrEqual(120 * SECOND);
    expect(wait).toBeLessThanOrEqual(132 * SECOND);

    // Where the schedule alone would retry (5.5 s at most), and 1 s before the Retry-After: nothing.
    for (const early of [at(5_500), new Date(Date.parse(d.nextAttemptAt!) - SECOND)]) {
      clock = early;
      await drainDue();
      expect(receiver.received).toHaveLength(1);
    }
    receiver.reply = () => ({});
    clock = new Date(d.nextAttemptAt!);
    await drainDue();
    expect(receiver.received).toHaveLength(2);
    d = await delivery(hook.id, deliveryId);
    expect(d).toMatchObject({ status: 'succeeded', attemptCount: 2, nextAttemptAt: null, lastHttpStatus: 200 });
  });

  it('as an HTTP date, and an invalid one is ignored', async () => {
    const hook = await createHook({ url: receiver.url, events: ['webhook.test'] });
    // An hour after the (fake) time of the attempt.
    receiver.reply = () => ({ status: 503, headers: { 'retry-after': new Date(clock.getTime() + HOUR).toUTCString() } });
    const dated = await sendTest(hook.id);
    await drainDue();
    let d = await delivery(hook.id, dated);
    expect(d).toMatchObject({ status: 'failed', lastHttpStatus: 503 });
    const wait = Date.parse(d.nextAttemptAt!) - Date.parse(d.attempts[0]!.at);
    expect(wait).toBeGreaterThanOrEqual(HOUR - SECOND);
    expect(wait).toBeLessThanOrEqual(HOUR);

    receiver.reply = () => ({ status: 503, headers: { 'retry-after': 'soon' } });
    const invalid = await sendTest(hook.id);
    await drainDue();
    d = await delivery(hook.id, invalid);
    const scheduled = Date.parse(d.nextAttemptAt!) - Date.parse(d.attempts[0]!.at);
    expect(scheduled).toBeGreaterThanOrEqual(4_500);
    expect(scheduled).toBeLessThanOrEqual(5_500);

    // A Retry-After of a day is capped at 10 h.
    receiver.reply = () => ({ status: 503, headers: { 'retry-after': String(24 * 3600) } });
    const long = await sendTest(hook.id);
    await drainDue();
    d = await delivery(hook.id, long);
    expect(Date.parse(d.nextAttemptAt!) - Date.parse(d.attempts[0]!.at)).toBe(10 * HOUR);
    expect(receiver.received).toHaveLength(3);
  });
});

describe('disabling', () => {
  it('410 Gone disables the endpoint at once, tells the other endpoints, and stops every later delivery but the test event', async () => {
    const gone = await createHook({ url: receiver.url, events: ['knowledge_base.created'] });
    const watcher = await createHook({ url: other.url, events: ['webhook.disabled'] });
    const start = clock;

    // A first event fails and is asked (Retry-After) to come back in an hour.
    receiver.reply = () => ({ status: 500, headers: { 'retry-after': '3600' } });
    const queued = await createKnowledgeBase(gone.id, 'Gone KB 1');
    await drainDue();
    expect((await delivery(gone.id, queued.deliveryId)).nextAttemptAt).toBe(at(HOUR).toISOString());

    // A second event gets 410.
    receiver.reply = () => ({ status: 410, body: 'gone' });
    const answered = await createKnowledgeBase(gone.id, 'Gone KB 2');
    await drainDue();
    expect(receiver.received).toHaveLength(2);
    const hook = await getHook(gone.id);
    expect(hook).toMatchObject({ enabled: false, disabledReason: 'gone', disabledAt: start.toISOString() });
    const d410 = await delivery(gone.id, answered.deliveryId);
    expect(d410).toMatchObject({ status: 'failed', attemptCount: 1, lastHttpStatus: 410, nextAttemptAt: null });
    expect(d410.attempts[0]).toMatchObject({ httpStatus: 410, responseExcerpt: 'gone', error: 'Receiver answered 410' });

    // The owner's other endpoint, subscribed to webhook.disabled, is told (in the same drain).
    expect(other.received).toHaveLength(1);
    const notice = payload(other.received[0]!);
    expect(notice).toMatchObject({ type: 'webhook.disabled', data: { webhookId: gone.id, url: gone.url, reason: 'gone', message: expect.any(String) } });
    expectSignedWith(watcher.secret, other.received[0]!);
    expect(other.received[0]!.headers['webhook-timestamp']).toBe(String(start.getTime() / 1000));
    expect((await deliveriesOf(watcher.id)).map((d) => [d.eventType, d.status])).toEqual([['webhook.disabled', 'succeeded']]);

    // The delivery queued before the 410 is not sent when its time comes.
    clock = at(HOUR + MINUTE);
    await drainDue();
    expect(receiver.received).toHaveLength(2);
    const stopped = await delivery(gone.id, queued.deliveryId);
    expect(stopped).toMatchObject({ status: 'failed', attemptCount: 1, nextAttemptAt: null });
    expect(stopped.attempts).toHaveLength(2);
    expect(stopped.attempts[1]).toMatchObject({ at: clock.toISOString(), trigger: 'automatic', httpStatus: null, error: 'Not sent: the endpoint is disabled' });

    // No further attempts of anything, days later.
    clock = at(3 * DAY);
    await drainDue();
    expect(receiver.received).toHaveLength(2);
    expect((await delivery(gone.id, answered.deliveryId)).attempts).toHaveLength(1);
    expect((await delivery(gone.id, queued.deliveryId)).attempts).toHaveLength(2);

    // A later event is not even queued for the disabled endpoint.
    const res = await app.request('POST', '/api/v1/knowledge-base/configs', { token: owner.token, body: { name: 'Gone KB 3' } });
    expect(res.status, res.text).toBe(201);
    await drainDue();
    expect(receiver.received).toHaveLength(2);
    expect((await deliveriesOf(gone.id)).map((d) => d.deliveryId).sort()).toEqual([queued.deliveryId, answered.deliveryId].sort());
    expect(other.received).toHaveLength(1);

    // The test event the owner asks for explicitly is still sent.
    receiver.reply = () => ({});
    const test = await sendTest(gone.id);
    await drainDue();
    expect(receiver.received).toHaveLength(3);
    expect(payload(receiver.received[2]!)).toMatchObject({ type: 'webhook.test', data: { webhookId: gone.id } });
    expect(await delivery(gone.id, test)).toMatchObject({ status: 'succeeded', lastHttpStatus: 200 });
    expect(await getHook(gone.id)).toMatchObject({ enabled: false, disabledReason: 'gone' });
  });

  it('five days without a success disable the endpoint (failing), not earlier', async () => {
    const failing = await createHook({ url: receiver.url, events: ['knowledge_base.created'] });
    const watcher = await createHook({ url: other.url, events: ['*'] });
    const start = clock;
    const disabledNotices = () => other.received.map(payload).filter((p) => p.type === 'webhook.disabled');
    receiver.reply = () => ({ status: 500 });

    await createKnowledgeBase(failing.id, 'Failing KB 1');
    await drainDue();
    expect(await getHook(failing.id)).toMatchObject({ enabled: true, failingSince: start.toISOString() });

    // Just under five days: still enabled, the streak still counts from the first failure.
    clock = at(5 * DAY - MINUTE);
    const early = await createKnowledgeBase(failing.id, 'Failing KB 2');
    await drainDue();
    expect((await delivery(failing.id, early.deliveryId)).attempts[0]).toMatchObject({ at: clock.toISOString(), httpStatus: 500 });
    expect(await getHook(failing.id)).toMatchObject({ enabled: true, disabledReason: null, failingSince: start.toISOString() });
    expect(disabledNotices()).toEqual([]);

    // A new event failing five days and a minute after the first failure disables it.
    clock = new Date(start.getTime() + 5 * DAY + MINUTE);
    const last = await createKnowledgeBase(failing.id, 'Failing KB 3');
    await drainDue();
    expect((await delivery(failing.id, last.deliveryId)).attempts[0]).toMatchObject({ at: clock.toISOString(), httpStatus: 500 });
    expect(await getHook(failing.id)).toMatchObject({
      enabled: false,
      disabledReason: 'failing',
      disabledAt: clock.toISOString(),
      failingSince: start.toISOString(),
    });
    expect(disabledNotices()).toHaveLength(1);
    expect(disabledNotices()[0]).toMatchObject({ data: { webhookId: failing.id, url: failing.url, reason: 'failing' } });
    expect((await deliveriesOf(watcher.id)).filter((d) => d.eventType === 'webhook.disabled')).toHaveLength(1);

    // The retries still scheduled are not sent.
    const sent = receiver.received.length;
    clock = at(2 * DAY);
    await drainDue();
    expect(receiver.received).toHaveLength(sent);
    for (const d of await deliveriesOf(failing.id)) {
      expect(d).toMatchObject({ status: 'failed', nextAttemptAt: null });
      expect(d.attempts.at(-1)).toMatchObject({ error: 'Not sent: the endpoint is disabled' });
    }
  });

  it('a success resets the failure streak', async () => {
    const hook = await createHook({ url: receiver.url, events: ['knowledge_base.created'] });
    const watcher = await createHook({ url: other.url, events: ['webhook.disabled'] });
    const start = clock;
    receiver.reply = () => ({ status: 500 });
    const first = await createKnowledgeBase(hook.id, 'Streak KB 1');
    await drainDue();
    expect(await getHook(hook.id)).toMatchObject({ failingSince: start.toISOString() });

    // Three days later the receiver is back: the pending retry and a new event succeed.
    clock = at(3 * DAY);
    receiver.reply = () => ({});
    const second = await createKnowledgeBase(hook.id, 'Streak KB 2');
    await drainDue();
    expect(await delivery(hook.id, first.deliveryId)).toMatchObject({ status: 'succeeded', attemptCount: 2 });
    expect(await delivery(hook.id, second.deliveryId)).toMatchObject({ status: 'succeeded', attemptCount: 1 });
    let got = await getHook(hook.id);
    expect(got).toMatchObject({ enabled: true, failingSince: null });
    expect(got.stats.lastSuccessAt).toBe(clock.toISOString());

    // Failing again: the streak starts anew, so five days after the very first failure it is still enabled.
    receiver.reply = () => ({ status: 500 });
    const restart = at(HOUR);
    clock = restart;
    await createKnowledgeBase(hook.id, 'Streak KB 3');
    await drainDue();
    expect(await getHook(hook.id)).toMatchObject({ enabled: true, failingSince: restart.toISOString() });
    clock = new Date(start.getTime() + 5 * DAY + MINUTE);
    const late = await createKnowledgeBase(hook.id, 'Streak KB 4');
    await drainDue();
    expect((await delivery(hook.id, late.deliveryId)).attempts[0]).toMatchObject({ at: clock.toISOString(), httpStatus: 500 });
    got = await getHook(hook.id);
    expect(got).toMatchObject({ enabled: true, disabledReason: null, failingSince: restart.toISOString() });
    expect(await deliveriesOf(watcher.id)).toEqual([]);
    expect(other.received).toHaveLength(0);
  });
});

describe('what a delivery checks when it goes out', () => {
  const replay = (hookId: string, deliveryId: string) => app.request('POST', `${base}/${hookId}/replay`, { token: owner.token, body: { deliveryId } });

  it('replay is a 409 for a disabled endpoint, and one queued before the endpoint was disabled is not sent', async () => {
    const hook = await createHook({ url: receiver.url, events: ['knowledge_base.created'] });
    receiver.reply = () => ({ status: 500 });
    const queued = await createKnowledgeBase(hook.id, 'Replay KB');
    await drainDue();
    expect(receiver.received).toHaveLength(1);

    receiver.reply = () => ({});
    const accepted = await replay(hook.id, queued.deliveryId);
    expect(accepted.status, accepted.text).toBe(200);
    expect((await app.request('PATCH', `${base}/${hook.id}`, { token: owner.token, body: { enabled: false } })).status).toBe(200);
    await drainDue();
    expect(receiver.received).toHaveLength(1);
    const held = await delivery(hook.id, queued.deliveryId);
    expect(held).toMatchObject({ status: 'failed', attemptCount: 1 });
    expect(held.attempts.at(-1)).toMatchObject({ trigger: 'replay', httpStatus: null, error: 'Not sent: the endpoint is disabled' });
    const refused = await replay(hook.id, queued.deliveryId);
    expect([refused.status, refused.body.error?.code], refused.text).toEqual([409, 'CONFLICT']);

    expect((await app.request('PATCH', `${base}/${hook.id}`, { token: owner.token, body: { enabled: true } })).status).toBe(200);
    expect((await replay(hook.id, queued.deliveryId)).status).toBe(200);
    await drainDue();
    expect(receiver.received).toHaveLength(2);
    expect(await delivery(hook.id, queued.deliveryId)).toMatchObject({ status: 'succeeded' });
  });

  it('an owner moved off the enterprise plan gets no retry until the plan is back', async () => {
    const hook = await createHook({ url: receiver.url, events: ['knowledge_base.created'] });
    receiver.reply = () => ({ status: 500 });
    const queued = await createKnowledgeBase(hook.id, 'Downgraded KB');
    await drainDue();
    expect(receiver.received).toHaveLength(1);

    const setPlan = (plan: 'premium' | 'enterprise') => app.deps.database.db.updateTable('owners').set({ plan }).where('id', '=', owner.ownerId).execute();
    receiver.reply = () => ({});
    await setPlan('premium');
    try {
      clock = at(HOUR);
      await drainDue();
    } finally {
      await setPlan('enterprise');
    }
    expect(receiver.received).toHaveLength(1);
    const held = await delivery(hook.id, queued.deliveryId);
    expect(held).toMatchObject({ status: 'failed', nextAttemptAt: null });
    expect(held.attempts.at(-1)).toMatchObject({ trigger: 'automatic', error: 'Not sent: the account is no longer on the enterprise plan' });

    // With the plan back, the owner may send it again.
    expect((await replay(hook.id, queued.deliveryId)).status).toBe(200);
    await drainDue();
    expect(receiver.received).toHaveLength(2);
  });
});

describe('secret rotation', () => {
  it('signs with both secrets during the grace period and with the new one alone after it', async () => {
    const hook = await createHook({ url: receiver.url, events: ['webhook.test'] });
    const rotated = await app.request('POST', `${base}/${hook.id}/rotate-secret`, { token: owner.token, body: {} });
    expect(rotated.status, rotated.text).toBe(200);
    const newSecret = rotated.body.secret as string;
    const graceUntil = Date.parse(rotated.body.previousSecretValidUntil);
    expect(newSecret).not.toBe(hook.secret);

    // Now (real time, so the library's timestamp check passes): two signatures, each secret verifies.
    clock = new Date();
    await sendTest(hook.id);
    await drainDue();
    expect(receiver.received).toHaveLength(1);
    const during = receiver.received[0]!;
    expect(signaturesOf(during)).toHaveLength(2);
    expect(verifyDelivery(newSecret, during)).toMatchObject({ type: 'webhook.test' });
    expect(verifyDelivery(hook.secret, during)).toMatchObject({ type: 'webhook.test' });
    expect(() => verifyDelivery(generateSecret(), during)).toThrow(/signature/i);

    // A minute before the grace period ends: still both (checked by hand: the timestamp is a day ahead).
    clock = new Date(graceUntil - MINUTE);
    await sendTest(hook.id);
    await drainDue();
    const lastMinute = receiver.received[1]!;
    expect(lastMinute.headers['webhook-timestamp']).toBe(String(Math.floor(clock.getTime() / 1000)));
    expect(signaturesOf(lastMinute)).toHaveLength(2);
    expectSignedWith(newSecret, lastMinute);
    expectSignedWith(hook.secret, lastMinute);

    // 25 h after the rotation: the old secret no longer signs.
    clock = new Date(Date.now() + 25 * HOUR);
    await sendTest(hook.id);
    await drainDue();
    expect(receiver.received).toHaveLength(3);
    const after = receiver.received[2]!;
    const timestamp = String(Math.floor(clock.getTime() / 1000));
    expect(after.headers['webhook-timestamp']).toBe(timestamp);
    const signatures = signaturesOf(after);
    expect(signatures).toHaveLength(1);
    expect(signatures[0]!.startsWith('v1,')).toBe(true);
    expect(signatures[0]).toBe(hmacSignature(newSecret, String(after.headers['webhook-id']), timestamp, after.body));
    expect(signatures[0]).not.toBe(hmacSignature(hook.secret, String(after.headers['webhook-id']), timestamp, after.body));
    // The library refuses it only for its (future) timestamp.
    expect(() => verifyDelivery(newSecret, after)).toThrow(/too new/i);
  });
});
