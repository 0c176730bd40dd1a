// Enterprise webhooks, delivery is at least once: "kill the process mid-delivery and restart, nothing is lost".
// The real service runs as a child process (`npm start`'s build, server/start.mjs) on its own data directory and database, with a
// real local receiver that answers slowly, so deliveries are in flight when the process is SIGKILLed. It is then
// started again on the same data: every event reaches the receiver at least once, every request verifies with
// the standardwebhooks library, a repeated delivery is the same event (same webhook-id, same body), and the
// delivery history ends with every delivery succeeded. A second phase does the same with a graceful stop
// (SIGTERM) mid-delivery, which must give its jobs back rather than leave them leased.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { z } from 'zod';
import type { webhookDeliverySchema } from '../../schema/webhooks.ts';
import type { Database } from '../../db/database.ts';
import { createChildStorage, startChildServer, type ChildServer, type ChildStorage } from '../helpers/child-server.ts';
import { startWebhookReceiver, verifyDelivery, type ReceivedWebhook, type WebhookReceiver } from '../helpers/webhook-receiver.ts';

/** Events of the SIGKILL phase and of the SIGTERM phase. */
const CRASH_EVENTS = 1_000;
const STOP_EVENTS = 300;
/** API calls in flight at once while producing events. */
const PRODUCERS = 8;
const WEBHOOK_CONCURRENCY = '8';
/** Short job lease (the default is 60 s; the minimum 1 s) so jobs the killed process held are claimable again soon after the restart. */
const JOB_LEASE_MS = '2000';
/**
 * While events are produced, the receiver stays at least this share of them behind: when it comes closer it
 * answers slowly (CATCH_UP_DELAY_MS) until production pulls ahead again. A backstop so that deliveries are
 * still under way when production ends on any machine; normally delivery lags production anyway.
 */
const MIN_BACKLOG_SHARE = 0.2;
const CATCH_UP_DELAY_MS = 250;
const RECOVERY_TIMEOUT_MS = 120_000;
const SETTLE_TIMEOUT_MS = 30_000;
const base = '/api/v1/enterprise/webhooks';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface ApiKey {
  id: string;
  name: string;
  chatInterfaceId: string;
  prefix: string;
  active: boolean;
  lastUsedAt: string | null;
  createdAt: string;
  updatedAt: string;
}

type Delivery = z.infer<typeof webhookDeliverySchema>;

let dataDir = '';
let storage: ChildStorage | undefined;
let server: ChildServer | undefined;
let receiver: WebhookReceiver;
const adminEmail = `wh-admin-${randomBytes(3).toString('hex')}@example.com`;
const secret = 'whsec_' + randomBytes(32).toString('base64');

/** State shared by the two phases (they run in order on the same data). */
let token = '';
let chatInterfaceId = '';
let webhookId = '';
/** Every key created so far, by id, as the API returned it: each is one api_key.created event. */
const createdKeys = new Map<string, ApiKey>();
/** Set while createKeys() runs: true when the receiver is closer to production than MIN_BACKLOG_SHARE allows. */
let catchingUp: (() => boolean) | undefined;

beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), 'cis-whcrash-'));
  storage = await createChildStorage('cis_whcrash');
  receiver = await startWebhookReceiver();
  // Slow enough that deliveries are still in flight when the process is killed.
  receiver.reply = () => ({ delayMs: catchingUp?.() ? CATCH_UP_DELAY_MS : 5 + Math.floor(Math.random() * 16) });
});

afterAll(async () => {
  await server?.crash().catch(() => {});
  await receiver?.close();
  await storage?.drop();
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

function start(): Promise<ChildServer> {
  return startChildServer({
    dataDir,
    env: {
      ...storage!.env,
      // Fixed key: the restarted process must open the webhook secret the first one sealed.
      ENCRYPTION_KEY: Buffer.alloc(32, 9).toString('base64'),
      ADMIN_EMAILS: adminEmail,
      OUTBOUND_ALLOW_HOSTS: receiver.hostPort,
      WEBHOOK_CONCURRENCY,
      JOB_LEASE_MS,
      RATE_LIMIT_DEFAULT: '100000',
      LOG_LEVEL: 'info',
    },
  });
}

/** Runs `fn` on the database while no child is running (PGlite: on a copy of the data directory). */
async function inspect<T>(fn: (database: Database) => Promise<T>): Promise<T> {
  expect(server, 'inspect() needs the child stopped').toBeUndefined();
  return storage!.inspect(dataDir, fn);
}

/** Delivery jobs and delivery rows by status, as the stopped process left them. */
const queueState = (database: Database) =>
  Promise.all([
    sql<{ status: string; n: number }>`select status, count(*)::int as n from jobs where kind = 'webhook.deliver' group by status`.execute(database.db),
    sql<{ status: string; n: number }>`select status, count(*)::int as n from webhook_deliveries group by status`.execute(database.db),
  ]).then(([jobs, deliveries]) => ({
    jobs: Object.fromEntries(jobs.rows.map((r) => [r.status, r.n])) as Record<string, number>,
    deliveries: Object.fromEntries(deliveries.rows.map((r) => [r.status, r.n])) as Record<string, number>,
  }));

/** Creates `count` API keys (each one api_key.created event), PRODUCERS at a time; returns them by id. */
async function createKeys(count: number, label: string): Promise<Map<string, ApiKey>> {
  const made = new Map<string, ApiKey>();
  let next = 0;
  const requestsBefore = receiver.received.length;
  const backlog = Math.floor(count * MIN_BACKLOG_SHARE);
  catchingUp = () => receiver.received.length - requestsBefore > made.size - backlog;
  const producer = async () => {
    while (next < count) {
      const i = next++;
      const res = await server!.request('POST', '/api/v1/api-keys', { token, body: { name: `${label}-${i}`, chatInterfaceId } });
      if (res.status !== 201) throw new Error(`create key ${label}-${i}: ${res.status} ${res.text}`);
      const key = res.body.data.apiKey as ApiKey;
      made.set(key.id, key);
    }
  };
  try {
    await Promise.all(Array.from({ length: PRODUCERS }, producer));
  } finally {
    catchingUp = undefined;
  }
  expect(made.size).toBe(count);
  for (const [id, key] of made) createdKeys.set(id, key);
  return made;
}

/** The key id in a received request's payload (without verifying: for progress polling only). */
function keyIdOf(request: ReceivedWebhook): string | undefined {
  try {
    return (JSON.parse(request.body) as { data?: { id?: string } }).data?.id;
  } catch {
    return undefined;
  }
}

/** How many of `keys` the receiver has seen an event for (copies counted once). */
function seenOf(keys: Map<string, ApiKey>): number {
  const seen = new Set<string>();
  for (const r of receiver.received) {
    const id = keyIdOf(r);
    if (id !== undefined && keys.has(id)) seen.add(id);
  }
  return seen.size;
}

/**
 * Waits until the receiver has seen more than `min` of the phase's events while not all of them, and holds one
 * unanswered: deliveries are then in progress. Fails if they all arrived first (the interruption would test nothing).
 */
async function waitUntilMidDelivery(keys: Map<string, ApiKey>, min: number): Promise<number> {
  for (const deadline = Date.now() + 30_000; ; ) {
    const seen = seenOf(keys);
    // With a request the receiver has not answered yet, its job is surely leased: the kill (sent before any timer of
    // this process can answer it) then interrupts a delivery, however slowly a loaded machine runs the poll.
    if (seen > min && seen < keys.size && receiver.open > 0) return seen;
    if (seen >= keys.size) throw new Error(`all ${keys.size} events were delivered before the process could be interrupted mid-delivery`);
    if (Date.now() > deadline) throw new Error(`only ${seen} of ${keys.size} events delivered within 30 s`);
    await sleep(5);
  }
}

/** Waits (bounded) until the receiver has seen every one of `keys`. */
async function waitForAll(keys: Map<string, ApiKey>): Promise<void> {
  for (const deadline = Date.now() + RECOVERY_TIMEOUT_MS; ; ) {
    const seen = seenOf(keys);
    if (seen === keys.size) return;
    if (Date.now() > deadline) throw new Error(`receiver saw ${seen} of ${keys.size} events ${RECOVERY_TIMEOUT_MS / 1000} s after the restart`);
    await sleep(50);
  }
}

/**
 * Checks what the receiver got for one phase's keys, as a customer would: every request verifies with the
 * standardwebhooks library; its webhook-id is the payload id; each key is in exactly one event (one webhook-id),
 * with the data the API returned; every copy of an event has the same body as its first copy. Returns the
 * number of requests and of duplicate copies.
 */
function checkReceived(keys: Map<string, ApiKey>): { requests: number; events: number; duplicates: number } {
  const firstBody = new Map<string, string>(); // webhook-id → body of its first copy
  const eventOfKey = new Map<string, Set<string>>(); // key id → webhook-ids carrying it
  const problems: string[] = [];
  let requests = 0;
  for (const r of receiver.received) {
    const keyId = keyIdOf(r);
    if (keyId === undefined || !keys.has(keyId)) continue; // another phase's event
    requests++;
    const webhookIdHeader = String(r.headers['webhook-id'] ?? '');
    let payload: { id: string; type: string; timestamp: string; data: ApiKey };
    try {
      payload = verifyDelivery(secret, r);
    } catch (error) {
      problems.push(`${webhookIdHeader}: does not verify: ${(error as Error).message}`);
      continue;
    }
    if (payload.id !== webhookIdHeader) problems.push(`${webhookIdHeader}: payload id ${payload.id} differs from webhook-id`);
    if (payload.type !== 'api_key.created') problems.push(`${webhookIdHeader}: type ${payload.type}`);
    if (JSON.stringify(payload.data) !== JSON.stringify(keys.get(keyId)))
      problems.push(`${webhookIdHeader}: data ${JSON.stringify(payload.data)} is not the key the API returned ${JSON.stringify(keys.get(keyId))}`);
    const first = firstBody.get(webhookIdHeader);
    if (first === undefined) firstBody.set(webhookIdHeader, r.body);
    else if (first !== r.body) problems.push(`${webhookIdHeader}: a repeated delivery has a different body:\n${first}\n${r.body}`);
    let ids = eventOfKey.get(keyId);
    if (!ids) eventOfKey.set(keyId, (ids = new Set()));
    ids.add(webhookIdHeader);
  }
  for (const [keyId, ids] of eventOfKey) if (ids.size !== 1) problems.push(`key ${keyId} arrived in ${ids.size} different events: ${[...ids].join(', ')}`);
  const missing = [...keys.keys()].filter((id) => !eventOfKey.has(id));
  if (missing.length > 0) problems.push(`${missing.length} keys never delivered, e.g. ${missing.slice(0, 5).join(', ')}`);
  expect(problems.slice(0, 20), `${problems.length} problems`).toEqual([]);
  expect(firstBody.size, 'distinct webhook-ids').toBe(keys.size);
  return { requests, events: firstBody.size, duplicates: requests - firstBody.size };
}

async function webhookStats(): Promise<{ deliveries: number; succeeded: number; failed: number; pending: number }> {
  const res = await server!.request('GET', `${base}/${webhookId}`, { token });
  if (res.status !== 200) throw new Error(`get webhook: ${res.status} ${res.text}`);
  return res.body.data.webhook.stats;
}

/** Every delivery of the webhook with `status`, following nextCursor (100 a page). */
async function deliveriesWithStatus(status: Delivery['status']): Promise<{ deliveries: Delivery[]; pages: number }> {
  const all: Delivery[] = [];
  let cursor: string | null = null;
  let pages = 0;
  do {
    const query: string = `?status=${status}&limit=100${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`;
    const res = await server!.request('GET', `${base}/${webhookId}/deliveries${query}`, { token });
    if (res.status !== 200) throw new Error(`deliveries ${query}: ${res.status} ${res.text}`);
    const page = res.body.data as { deliveries: Delivery[]; nextCursor: string | null; hasMore: boolean };
    expect(page.hasMore).toBe(page.nextCursor !== null);
    all.push(...page.deliveries);
    cursor = page.nextCursor;
    if (++pages > 1_000) throw new Error('deliveries: the cursor does not advance');
  } while (cursor);
  return { deliveries: all, pages };
}

/**
 * Waits until the service records every delivery as settled, then checks the delivery history through the API:
 * `total` succeeded deliveries (paged, 100 at a time), one per event the receiver saw, each ending in a 200;
 * nothing pending, failed or exhausted.
 */
async function checkHistory(total: number): Promise<void> {
  let stats = await webhookStats();
  for (const deadline = Date.now() + SETTLE_TIMEOUT_MS; stats.pending > 0 || stats.succeeded < total; ) {
    if (Date.now() > deadline)
      throw new Error(`deliveries not settled ${SETTLE_TIMEOUT_MS / 1000} s after the receiver saw every event: ${JSON.stringify(stats)}`);
    await sleep(100);
    stats = await webhookStats();
  }
  expect(stats).toMatchObject({ deliveries: total, succeeded: total, failed: 0, pending: 0 });

  const { deliveries: succeeded, pages } = await deliveriesWithStatus('succeeded');
  const receivedEventIds = new Set(receiver.received.map((r) => String(r.headers['webhook-id'])));
  const listedEventIds = new Set(succeeded.map((d) => d.eventId));
  const unlisted = [...receivedEventIds].filter((id) => !listedEventIds.has(id));
  // Soft: a listing that misses deliveries the stats count as succeeded is reported, and the checks below still run.
  expect
    .soft(
      succeeded.length,
      `succeeded deliveries listed through ${pages} pages (events received, counted as succeeded, but on no page: ${unlisted.join(', ') || 'none'})`,
    )
    .toBe(total);
  expect.soft(unlisted, 'events received but not listed as succeeded').toEqual([]);
  expect(new Set(succeeded.map((d) => d.deliveryId)).size, 'a delivery listed twice').toBe(succeeded.length);
  expect(listedEventIds.size, 'one delivery per event').toBe(succeeded.length);
  expect(
    [...listedEventIds].filter((id) => !receivedEventIds.has(id)),
    'succeeded deliveries the receiver never got',
  ).toEqual([]);
  expect.soft(pages).toBe(Math.ceil(total / 100));
  const odd = succeeded.filter(
    (d) =>
      d.webhookId !== webhookId ||
      d.eventType !== 'api_key.created' ||
      d.lastHttpStatus !== 200 ||
      d.attempts.length < 1 ||
      d.attempts.some((a) => a.httpStatus !== 200),
  );
  expect(odd.slice(0, 5), 'succeeded deliveries with an unexpected attempt history').toEqual([]);
  for (const status of ['pending', 'failed', 'exhausted'] as const) {
    const res = await server!.request('GET', `${base}/${webhookId}/deliveries?status=${status}&limit=100`, { token });
    expect(res.status, res.text).toBe(200);
    expect(res.body.data.deliveries, `${status} deliveries`).toEqual([]);
  }
}

describe('a crash during webhook delivery', () => {
  it('crash mid-delivery then restart with nothing lost (1,000 events, each delivered at least once)', async () => {
    const t0 = Date.now();
    const timings: Record<string, number> = {};
    const mark = (name: string) => (timings[name] = Date.now() - t0);

    server = await start();
    mark('started');
    // An admin (ADMIN_EMAILS) makes the owner enterprise through the admin API.
    const admin = await server.request('POST', '/api/v1/auth/sign-up', { body: { email: adminEmail, password: 'correct horse battery' } });
    expect(admin.status, admin.text).toBe(201);
    expect(admin.body.data.owner.role).toBe('admin');
    const owner = await server.request('POST', '/api/v1/auth/sign-up', {
      body: { email: `wh-crash-${randomBytes(3).toString('hex')}@example.com`, password: 'correct horse battery' },
    });
    expect(owner.status, owner.text).toBe(201);
    token = owner.body.data.token as string;
    const ownerId = owner.body.data.owner.id as string;
    expect((await server.request('GET', base, { token })).status, 'not enterprise yet').toBe(403);
    const upgraded = await server.request('PATCH', `/api/v1/admin/owners/${ownerId}`, { token: admin.body.data.token, body: { plan: 'enterprise' } });
    expect(upgraded.status, upgraded.text).toBe(200);

    const hook = await server.request('POST', base, { token, body: { url: receiver.url, secret, events: ['api_key.created'], description: 'crash test' } });
    expect(hook.status, hook.text).toBe(201);
    expect(hook.body.data.secret, 'an owner-supplied secret is not echoed').toBeUndefined();
    webhookId = hook.body.data.webhook.id as string;
    const ci = await server.request('POST', '/api/v1/chat-interfaces', { token, body: { name: 'Webhook crash test' } });
    expect(ci.status, ci.text).toBe(201);
    chatInterfaceId = ci.body.data.chatInterface.id as string;
    mark('prepared');

    const keys = await createKeys(CRASH_EVENTS, 'crash');
    mark('produced');
    const seenWhenProduced = seenOf(keys);

    // The crash: SIGKILL to the process group while deliveries are in flight.
    const seenBeforeKill = await waitUntilMidDelivery(keys, 100);
    await server.crash();
    server = undefined;
    mark('crashed');
    const seenAtCrash = seenOf(keys);
    const requestsAtCrash = receiver.received.length;
    expect(seenAtCrash).toBeLessThan(CRASH_EVENTS);
    // It interrupted delivery in progress: deliveries still pending and jobs left running, leased by the dead process.
    const atCrash = await inspect(queueState);
    expect(atCrash.deliveries.pending ?? 0, JSON.stringify(atCrash)).toBeGreaterThan(0);
    expect(atCrash.jobs.running ?? 0, JSON.stringify(atCrash)).toBeGreaterThanOrEqual(1);
    expect(
      Object.values(atCrash.deliveries).reduce((a, b) => a + b, 0),
      'every event has its delivery row (outbox)',
    ).toBe(CRASH_EVENTS);

    // Restart on the same data directory / database; sessions are stored, so the token still works.
    server = await start();
    mark('restarted');
    await waitForAll(keys);
    mark('allReceived');
    const received = checkReceived(keys);
    await checkHistory(CRASH_EVENTS);
    mark('checked');
    console.log(
      `webhooks-crash (SIGKILL, ${process.env.DATABASE_URL ? 'postgres' : 'pglite'}): ${received.events} events, ${received.requests} requests, ${received.duplicates} duplicates; ` +
        `receiver had ${seenWhenProduced} events when production ended, ${seenBeforeKill} just before the kill, ${seenAtCrash} (${requestsAtCrash} requests) after it; ` +
        `at the crash jobs ${JSON.stringify(atCrash.jobs)} deliveries ${JSON.stringify(atCrash.deliveries)}; ms since start ${JSON.stringify(timings)}`,
    );
  }, 150_000);

  it('a graceful stop (SIGTERM) mid-delivery then restart: nothing lost, the stopped process leaves no job leased', async () => {
    expect(server, 'needs the server the first test restarted').toBeDefined();
    const t0 = Date.now();
    const timings: Record<string, number> = {};
    const mark = (name: string) => (timings[name] = Date.now() - t0);
    const requestsBefore = receiver.received.length;

    const keys = await createKeys(STOP_EVENTS, 'stop');
    mark('produced');
    const seenBeforeStop = await waitUntilMidDelivery(keys, 30);
    const exitCode = await server!.stop();
    const output = server!.output();
    server = undefined;
    mark('stopped');
    expect(exitCode, output.slice(-3000)).toBe(0);
    const seenAtStop = seenOf(keys);
    expect(seenAtStop).toBeLessThan(STOP_EVENTS);
    const atStop = await inspect(queueState);
    // A graceful stop gives its jobs back (queued, attempt not counted) instead of leaving them leased.
    expect(atStop.jobs.running ?? 0, JSON.stringify(atStop)).toBe(0);
    expect(atStop.jobs.queued ?? 0, JSON.stringify(atStop)).toBeGreaterThan(0);
    expect(atStop.jobs.dead ?? 0, JSON.stringify(atStop)).toBe(0);
    expect(atStop.deliveries.failed ?? 0, 'deliveries failed by the stop').toBe(0);
    const released = output.split('\n').filter((l) => l.includes('"msg":"job interrupted by stop; released"')).length;

    server = await start();
    mark('restarted');
    await waitForAll(keys);
    mark('allReceived');
    const received = checkReceived(keys);
    checkReceived(new Map([...createdKeys].filter(([id]) => !keys.has(id)))); // the first phase's events are unchanged
    await checkHistory(CRASH_EVENTS + STOP_EVENTS);

    const finalCode = await server.stop();
    const finalOutput = server.output();
    server = undefined;
    expect(finalCode, finalOutput.slice(-3000)).toBe(0);
    mark('checked');
    // Every delivery job finished (none dead, none left behind), one per delivery.
    const { final, sameMillisecond } = await inspect(async (database) => ({
      final: await queueState(database),
      // Deliveries created in the same millisecond as another one (the history's page cursor carries milliseconds).
      sameMillisecond: (
        await sql<{ n: number }>`
        select coalesce(sum(n), 0)::int as n from (select count(*) as n from webhook_deliveries group by date_trunc('milliseconds', created_at) having count(*) > 1) t`.execute(
          database.db,
        )
      ).rows[0]!.n,
    }));
    expect(final).toEqual({ jobs: { done: CRASH_EVENTS + STOP_EVENTS }, deliveries: { succeeded: CRASH_EVENTS + STOP_EVENTS } });
    console.log(
      `webhooks-crash (SIGTERM, ${process.env.DATABASE_URL ? 'postgres' : 'pglite'}): ${received.events} events, ${received.requests} requests, ${received.duplicates} duplicates; ` +
        `receiver had ${seenBeforeStop} events just before the stop, ${seenAtStop} after it (${receiver.received.length - requestsBefore} requests in this phase); ` +
        `${released} jobs released by the stop; ${sameMillisecond} deliveries share their created_at millisecond with another; at the stop jobs ${JSON.stringify(atStop.jobs)} deliveries ${JSON.stringify(atStop.deliveries)}; ms since start ${JSON.stringify(timings)}`,
    );
  }, 90_000);
});
