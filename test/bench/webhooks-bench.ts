/**
 * Enterprise webhooks benchmark: `npm run bench:webhooks`.
 *
 * Events per second from a state change to the receiver's acknowledgement, on a local receiver, and the
 * end-to-end latency (p50/p99), with the receiver's own handling time measured in the same run as the
 * baseline; the same state changes with no webhook subscribed (the cost of the outbox and the deliveries on
 * the write path); and a burst (how fast a backlog drains).
 *
 * Set-up, all on 127.0.0.1:
 *   - The service in this process (bench-kit's startBenchService: embedded PGlite in a temp DATA_DIR, or a
 *     scratch PostgreSQL database on DATABASE_URL's server; rate limits raised; OUTBOUND_ALLOW_HOSTS = the
 *     receiver's 127.0.0.1:port, so its plain-http URL is accepted), with its default delivery workers
 *     (WEBHOOK_CONCURRENCY) unless BENCH_WEBHOOK_CONCURRENCY says otherwise.
 *   - A forked child (the "driver"), so that neither the client's nor the receiver's work runs on the
 *     service's event loop (see test/bench/load.ts); on this 2-core machine they still share the CPU:
 *       the receiver: a plain node:http server on a path of its own (/hooks/<uuid>; a stray request from some
 *       other process that once had the port is counted apart and ignored) that reads each delivery, parses
 *       its JSON and answers 200 "ok", recording per webhook-id when the request arrived (headers parsed),
 *       when its body was read ("received") and when the answer was handed to the OS ('finish':
 *       "acknowledged"). Its handling time, request arrival -> acknowledged, is the baseline. Every delivery's
 *       signature is checked with the standardwebhooks library after each window, not inside the timed
 *       handler, so the bench measures real signed deliveries;
 *       the client: POST /api/v1/api-keys over HTTPS (bench-kit's `call`, keep-alive); each creates a key and
 *       emits `api_key.created` through the outbox. Each change is matched to its delivery by the payload's
 *       data.id (the new key's id).
 *   Times are process.hrtime (CLOCK_MONOTONIC); the service's own attempt records (wall clock, ms) are mapped
 *   onto it for the breakdown.
 *
 * "State change committed" = the moment the client has the API response (the transaction, outbox rows
 * included, commits before the response is written, so this is an upper bound on the commit time and the
 * latencies are, if anything, slightly short; from request sent rides along as `from_sent_ms`).
 *
 * One enterprise owner (owners.plan set in the database, as the tests do), one chat interface, one webhook
 * (events ['api_key.created']). Phases, in this order:
 *   0. warm-up: BENCH_WARMUP_EVENTS changes with the subscription and as many without (checked, not reported).
 *   1. isolated: BENCH_ISOLATED_EVENTS changes one at a time, each after the previous one's delivery was
 *      acknowledged: the latency of one event on an otherwise idle service.
 *   2. sustained: BENCH_ROUNDS rounds alternating the order (baseline, webhook / webhook, baseline ...),
 *      BENCH_EVENTS changes per mode in all, BENCH_CONCURRENCY loops:
 *      - webhook: each loop makes a change and waits until the receiver has acknowledged its delivery before
 *        the next (at most BENCH_CONCURRENCY events in flight end to end, so the pipeline settles into a steady
 *        state instead of piling up a backlog); events/s = events / (first call sent -> last acknowledgement);
 *      - baseline: the webhook subscribed to another event type (api_key.deleted, never emitted here), so no
 *        delivery is queued; each loop makes a change, then the next; changes/s = changes / (first call sent ->
 *        last response). The outbox statement still runs in the change's transaction and finds no target, as
 *        for every owner without a subscription: the baseline is the write path without webhooks, not without
 *        the outbox code.
 *   3. burst: BENCH_BURST_EVENTS changes as fast as the API takes them (BENCH_BURST_CONCURRENCY in flight, not
 *      waiting for deliveries), then until the receiver has acknowledged them all: the backlog left when the
 *      last API call answered and how fast it drained after that (delivery alone).
 * Integrity: every change must arrive exactly once (webhook-id and data.id), every signature must verify, the
 * baseline windows must deliver nothing; otherwise the run exits 1. Retries come from webhook_deliveries.
 *
 * stdout: one JSON line per figure, nothing else (progress and diagnostics go to stderr):
 *   {"bench":"webhooks","phase":"sustained","metric":"events_per_s","value":...,"baseline":"no-webhook-subscribed","baseline_value":...,"ratio":...}
 *   {"bench":"webhooks","phase":"sustained","metric":"api_p50_ms"|"api_p99_ms","value":...,"baseline":"no-webhook-subscribed",...,"added_ms":...}
 *   {"bench":"webhooks","phase":"isolated"|"sustained","metric":"e2e_received_p50_ms"|"e2e_received_p99_ms"|"e2e_acked_p50_ms"|"e2e_acked_p99_ms",
 *    "value":...,"baseline":"receiver-handling","baseline_value":...,"added_ms":value - baseline}
 *   {"bench":"webhooks","phase":"burst","metric":"burst_events_per_s","value":...,"baseline":"burst-api-only",...,"drain_events_per_s_after_api":...}
 *   {"bench":"webhooks","metric":"duplicates","value":0,"missing":0,"all_arrived":true,"signatures_verified":...,...}
 *   {"bench":"webhooks-profile","phase":...,"metric":"delivery_breakdown_ms",...}: where the time goes (commit -> attempt start ->
 *    receiver -> acknowledged -> the service reads the answer), from the service's own attempt records
 *
 * Knobs (environment):
 *   BENCH_EVENTS               changes per mode in the sustained phase, split over the rounds, default 2000 (100..20000)
 *   BENCH_CONCURRENCY          loops in the sustained phase, default 8 (1..16)
 *   BENCH_ROUNDS               alternating rounds, default 2 (1..6)
 *   BENCH_ISOLATED_EVENTS      changes in the isolated phase, default 200 (0 = none; ..5000)
 *   BENCH_BURST_EVENTS         changes in the burst, default 1000 (0 = none; ..20000)
 *   BENCH_BURST_CONCURRENCY    API calls in flight in the burst, default 16 (1..16)
 *   BENCH_WARMUP_EVENTS        warm-up changes per mode, default 100 (0..2000)
 *   BENCH_WEBHOOK_CONCURRENCY  the service's WEBHOOK_CONCURRENCY (default: the service's own default, 8)
 *   BENCH_TIMEOUT_S            hard bound on the whole run, default 300 (60..3600): then it cleans up and exits 1
 *   DATABASE_URL               optional postgres:// URL of a server on which a scratch database is created and dropped
 */
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { availableParallelism } from 'node:os';
import { monitorEventLoopDelay, performance as nodePerformance } from 'node:perf_hooks';
import type { BenchService } from './bench-kit.ts';
import { forkJobWorker, serveJobs } from './job-worker.ts';

const DRIVER_ENV = 'BENCH_WEBHOOKS_DRIVER';

/** CLOCK_MONOTONIC in milliseconds: comparable between the processes of one host (performance.now() is not). */
const monoMs = () => Number(process.hrtime.bigint()) / 1e6;

// =====================================================================================================
// The driver (forked child): the receiver and the client
// =====================================================================================================

/** One delivery as the receiver saw it (first arrival of its webhook-id). */
interface Arrival {
  webhookId: string;
  type: string;
  /** data.id of the payload: the API key's id for api_key.created. */
  dataId: string;
  /** 'request' event: headers parsed. */
  startMs: number;
  /** Body read. */
  receivedMs: number;
  /** Response handed to the OS ('finish'). */
  ackMs: number;
}

/** One POST /api/v1/api-keys: the new key's id, when it was sent and when its response was complete. */
interface Change {
  id: string;
  sentMs: number;
  answeredMs: number;
}

/**
 * How a run makes its changes:
 *   api-only  `concurrency` loops, each: make a change, then the next (the deliveries, if any, are not waited for)
 *   e2e       `concurrency` loops, each: make a change, wait until the receiver has acknowledged its delivery, then
 *             the next: at most `concurrency` events in flight end to end (a closed loop through the receiver)
 *   burst     as api-only, then wait until every delivery is acknowledged
 */
type RunMode = 'api-only' | 'e2e' | 'burst';

interface RunJob {
  cmd: 'run';
  mode: RunMode;
  origin: string;
  token: string;
  chatInterfaceId: string;
  count: number;
  concurrency: number;
  label: string;
  /** For the signature check after the window. */
  secret: string;
  timeoutMs: number;
  /** Wait after the window's last change or delivery, so late or duplicate deliveries still count in it. */
  settleMs: number;
}

interface RunResult {
  changes: Change[];
  arrivals: Arrival[];
  duplicates: number;
  /** Requests to our path that were not a parseable POST with a webhook-id. */
  malformed: number;
  /** Requests to another path: not from this run's service (another process on the host reusing the port). */
  foreign: number;
  verified: number;
  verifyFailures: number;
  firstVerifyError?: string;
  /** TCP connections the service opened to the receiver during the window. */
  connections: number;
}

/** The first job starts the receiver and answers where it listens; then one `run` job per window. */
type DriverJob = { cmd: 'start' } | RunJob;
type DriverResult = { port: number; path: string } | RunResult;

async function startDriver() {
  const kit = await import('./bench-kit.ts');
  const { Webhook } = await import('standardwebhooks');

  // ---- the receiver ----
  let arrivals: Arrival[] = [];
  let byDataId = new Map<string, Arrival>();
  let raw: Array<{ headers: IncomingHttpHeaders; body: string }> = [];
  /** Every webhook-id acknowledged in this run (not reset per window: a late duplicate still counts as one). */
  const seen = new Set<string>();
  let duplicates = 0;
  let malformed = 0;
  let foreign = 0;
  let connections = 0;
  // A path of its own: a stray request from another process that once had this port is told apart.
  const path = `/hooks/${randomUUID()}`;
  /** data.id -> the loop waiting for that delivery (e2e mode). */
  const waiters = new Map<string, () => void>();
  let countWaiter: { count: number; resolve: () => void } | undefined;

  const server: Server = createServer({ keepAliveTimeout: 5_000 }, (req, res) => {
    const startMs = monoMs();
    if (req.url !== path) {
      foreign++;
      req.resume();
      res.writeHead(404).end();
      return;
    }
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const receivedMs = monoMs();
      const body = Buffer.concat(chunks).toString('utf8');
      const webhookId = req.headers['webhook-id'];
      let payload: { type?: unknown; data?: { id?: unknown } } | undefined;
      try {
        payload = JSON.parse(body) as typeof payload;
      } catch {
        payload = undefined;
      }
      res.on('finish', () => {
        const ackMs = monoMs();
        // Bookkeeping once the answer is out: not part of the handling time.
        if (req.method !== 'POST' || typeof webhookId !== 'string' || !payload) {
          malformed++;
          return;
        }
        if (seen.has(webhookId)) {
          duplicates++;
          return;
        }
        seen.add(webhookId);
        const arrival: Arrival = { webhookId, type: String(payload.type), dataId: String(payload.data?.id), startMs, receivedMs, ackMs };
        arrivals.push(arrival);
        byDataId.set(arrival.dataId, arrival);
        raw.push({ headers: req.headers, body });
        const w = waiters.get(arrival.dataId);
        if (w) {
          waiters.delete(arrival.dataId);
          w();
        }
        if (countWaiter && arrivals.length >= countWaiter.count) countWaiter.resolve();
      });
      res.writeHead(200, { 'content-type': 'text/plain', 'content-length': '2' }).end('ok');
    });
  });
  server.on('connection', () => connections++);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));

  const verify = (secret: string) => {
    const wh = new Webhook(secret);
    let verified = 0;
    let failures = 0;
    let firstError: string | undefined;
    for (const r of raw) {
      try {
        const headers = {
          'webhook-id': String(r.headers['webhook-id'] ?? ''),
          'webhook-timestamp': String(r.headers['webhook-timestamp'] ?? ''),
          'webhook-signature': String(r.headers['webhook-signature'] ?? ''),
        };
        const payload = wh.verify(r.body, headers) as { id?: string };
        if (payload.id !== headers['webhook-id']) throw new Error('payload id differs from webhook-id');
        verified++;
      } catch (error) {
        failures++;
        firstError ??= `${error instanceof Error ? error.message : String(error)} (webhook-id ${String(r.headers['webhook-id'])}, ${r.body.slice(0, 120)})`;
      }
    }
    return { verified, failures, firstError };
  };

  const withTimeout = <T>(p: Promise<T>, ms: number, what: string): Promise<T> => {
    let timer: NodeJS.Timeout | undefined;
    const expired = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms);
    });
    return Promise.race([p, expired]).finally(() => clearTimeout(timer));
  };

  // ---- the client ----
  const run = async (job: RunJob): Promise<RunResult> => {
    if (new URL(job.origin).hostname !== '127.0.0.1') throw new Error('the client only targets 127.0.0.1');
    const until = Date.now() + job.timeoutMs;
    const left = () => Math.max(1, until - Date.now());
    const indexes = Array.from({ length: job.count }, (_, i) => i);
    const changes = await kit.mapPool(indexes, job.concurrency, async (i): Promise<Change> => {
      const sentMs = monoMs();
      const r = await kit.call(job.origin, 'POST', '/api/v1/api-keys', {
        token: job.token,
        body: { name: `${job.label} ${i}`, chatInterfaceId: job.chatInterfaceId },
      });
      const answeredMs = monoMs();
      if (r.status !== 201) throw new Error(`POST /api/v1/api-keys: ${r.status} ${r.text.slice(0, 300)}`);
      const id = String(r.json.data.apiKey.id);
      if (job.mode === 'e2e' && !byDataId.has(id)) {
        await withTimeout(new Promise<void>((resolve) => waiters.set(id, resolve)), left(), `delivery of change ${i}`);
      }
      return { id, sentMs, answeredMs };
    });
    if (job.mode === 'burst' && arrivals.length < job.count) {
      await withTimeout(new Promise<void>((resolve) => (countWaiter = { count: job.count, resolve })), left(), `${job.count} deliveries`);
      countWaiter = undefined;
    }
    await new Promise((r) => setTimeout(r, job.settleMs));
    const v = verify(job.secret);
    return { changes, arrivals, duplicates, malformed, foreign, verified: v.verified, verifyFailures: v.failures, firstVerifyError: v.firstError, connections };
  };

  process.on('disconnect', () => {
    server.closeAllConnections();
    server.close();
    kit.benchAgent.destroy();
  });
  return {
    port: (server.address() as AddressInfo).port,
    path,
    /** One window at a time (serveJobs runs jobs in turn): what arrives from now on belongs to it. */
    runWindow(job: RunJob) {
      arrivals = [];
      byDataId = new Map();
      raw = [];
      duplicates = 0;
      malformed = 0;
      foreign = 0;
      connections = 0;
      waiters.clear();
      countWaiter = undefined;
      return run(job);
    },
  };
}

// =====================================================================================================
// Forking the driver
// =====================================================================================================

interface Driver {
  ready: Promise<{ port: number; path: string }>;
  run(job: Omit<RunJob, 'cmd'>): Promise<RunResult>;
  close(): Promise<void>;
}

/** Forks this file as the driver (job-worker.ts); stdout stays reserved for the JSON lines. */
function forkDriver(): Driver {
  // The driver bounds its own run by job.timeoutMs; these bounds only catch a driver that stopped answering.
  const worker = forkJobWorker<DriverJob, DriverResult>(import.meta.url, { [DRIVER_ENV]: '1' }, (job) =>
    job.cmd === 'start' ? 60_000 : job.timeoutMs + job.settleMs + 30_000,
  );
  return {
    ready: worker.run({ cmd: 'start' }) as Promise<{ port: number; path: string }>,
    run: async (job) => (await worker.run({ ...job, cmd: 'run' })) as RunResult,
    close: () => worker.close(),
  };
}

// =====================================================================================================
// The benchmark
// =====================================================================================================

/** A measured window: the changes made and what the receiver saw meanwhile. */
interface Window {
  changes: Change[];
  run: RunResult;
  /** data.id -> arrival (empty for a window without the subscription). */
  byDataId: Map<string, Arrival>;
}

/** End-to-end latencies of the changes of `windows` and the receiver's handling times. */
function e2eOf(kit: typeof import('./bench-kit.ts'), windows: Window[]) {
  const received: number[] = [];
  const acked: number[] = [];
  const fromSent: number[] = [];
  const handling: number[] = [];
  let beforeResponse = 0;
  for (const w of windows) {
    for (const ch of w.changes) {
      const a = w.byDataId.get(ch.id);
      if (!a) continue;
      received.push(a.receivedMs - ch.answeredMs);
      acked.push(a.ackMs - ch.answeredMs);
      fromSent.push(a.ackMs - ch.sentMs);
      if (a.receivedMs < ch.answeredMs) beforeResponse++;
    }
    for (const a of w.run.arrivals) handling.push(a.ackMs - a.startMs);
  }
  const s = kit.latencySummary;
  return { received: s(received), acked: s(acked), fromSent: s(fromSent), handling: s(handling), beforeResponse };
}

/**
 * Event-loop utilisation, event-loop delay (how late a 5 ms timer fires: how long a ready socket, such as the
 * receiver's answer, may wait before the service reads it) and CPU of this process (the service) until stop().
 */
function serviceLoad() {
  const elu0 = nodePerformance.eventLoopUtilization();
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const delay = monitorEventLoopDelay({ resolution: 5 });
  delay.enable();
  return {
    stop() {
      delay.disable();
      const elu = nodePerformance.eventLoopUtilization(elu0);
      const cpu = process.cpuUsage(cpu0);
      const delayP50Ms = delay.count > 0 ? delay.percentile(50) / 1e6 : NaN;
      const delayP99Ms = delay.count > 0 ? delay.percentile(99) / 1e6 : NaN;
      return { elu: elu.utilization, cpuCores: (cpu.user + cpu.system) / 1000 / (performance.now() - t0), delayP50Ms, delayP99Ms };
    },
  };
}

const span = (changes: Change[], arrivals: Arrival[]) => {
  let first = Infinity;
  let lastAnswer = -Infinity;
  let lastAck = -Infinity;
  for (const c of changes) {
    first = Math.min(first, c.sentMs);
    lastAnswer = Math.max(lastAnswer, c.answeredMs);
  }
  for (const a of arrivals) lastAck = Math.max(lastAck, a.ackMs);
  return { first, lastAnswer, lastAck };
};

async function main() {
  const kit = await import('./bench-kit.ts');
  const { intEnv, round, latencySummary } = kit;
  const log = kit.createLog('webhooks');
  const EVENTS = intEnv('BENCH_EVENTS', 2_000, 100, 20_000);
  const CONCURRENCY = intEnv('BENCH_CONCURRENCY', 8, 1, 16);
  const ROUNDS = intEnv('BENCH_ROUNDS', 2, 1, 6);
  const ISOLATED_EVENTS = intEnv('BENCH_ISOLATED_EVENTS', 200, 0, 5_000);
  const BURST_EVENTS = intEnv('BENCH_BURST_EVENTS', 1_000, 0, 20_000);
  const BURST_CONCURRENCY = intEnv('BENCH_BURST_CONCURRENCY', 16, 1, 16);
  const WARMUP_EVENTS = intEnv('BENCH_WARMUP_EVENTS', 100, 0, 2_000);
  const WEBHOOK_CONCURRENCY = process.env.BENCH_WEBHOOK_CONCURRENCY ? intEnv('BENCH_WEBHOOK_CONCURRENCY', 8, 1, 64) : undefined;
  const TIMEOUT_S = intEnv('BENCH_TIMEOUT_S', 300, 60, 3600);
  const EVENT = 'api_key.created';
  /** Subscribed to in the baseline windows instead: never emitted by this bench. */
  const OTHER_EVENT = 'api_key.deleted';
  const SETTLE_MS = 300;

  const started = performance.now();
  const deadline = Date.now() + TIMEOUT_S * 1000;
  const remainingMs = () => Math.max(1_000, deadline - Date.now() - 15_000);
  let service: BenchService | undefined;
  let driver: Driver | undefined;
  const watchdog = kit.startWatchdog(TIMEOUT_S, log, async () => {
    await service?.cleanup();
    await driver?.close();
  });

  const loadAtStart = kit.loadAverage();
  try {
    driver = forkDriver();
    const { port, path } = await driver.ready;
    const receiverUrl = `http://127.0.0.1:${port}${path}`;
    log(`receiver and client (child process) ready; receiver on ${receiverUrl}`);

    service = await kit.startBenchService(log, {
      OUTBOUND_ALLOW_HOSTS: `127.0.0.1:${port}`,
      ...(WEBHOOK_CONCURRENCY ? { WEBHOOK_CONCURRENCY: String(WEBHOOK_CONCURRENCY) } : {}),
    });
    const { app } = service;
    const db = app.deps.database.db;
    const origin = new URL(app.url).origin;
    const database = service.databaseKind;
    const webhookConcurrency = app.deps.config.WEBHOOK_CONCURRENCY;
    log(`service on ${app.url} (${database}, WEBHOOK_CONCURRENCY ${webhookConcurrency})`);

    // ---- the owner, an interface to hang keys on, the webhook ----------------------------------------
    const token = await kit.signUp(origin);
    const me = await kit.expectStatus(kit.call(origin, 'GET', '/api/v1/auth/me', { token }), 200, 'me');
    const ownerId = me.json.data.owner.id as string;
    await db.updateTable('owners').set({ plan: 'enterprise' }).where('id', '=', ownerId).execute();
    const ci = await kit.expectStatus(
      kit.call(origin, 'POST', '/api/v1/chat-interfaces', { token, body: { name: 'Webhook bench' } }),
      201,
      'create chat interface',
    );
    const chatInterfaceId = ci.json.data.chatInterface.id as string;
    const hook = await kit.expectStatus(
      kit.call(origin, 'POST', '/api/v1/enterprise/webhooks', { token, body: { url: receiverUrl, events: [EVENT], description: 'bench receiver' } }),
      201,
      'create webhook',
    );
    const webhookId = hook.json.data.webhook.id as string;
    const secret = hook.json.data.secret as string;
    let subscribedNow = true;
    const subscribe = async (subscribed: boolean) => {
      if (subscribed === subscribedNow) return;
      await kit.expectStatus(
        kit.call(origin, 'PATCH', `/api/v1/enterprise/webhooks/${webhookId}`, { token, body: { events: [subscribed ? EVENT : OTHER_EVENT] } }),
        200,
        'update webhook',
      );
      subscribedNow = subscribed;
    };

    // Integrity over every window.
    const integrity = {
      expected: 0,
      received: 0,
      missing: 0,
      duplicates: 0,
      malformed: 0,
      foreign: 0,
      verified: 0,
      verifyFailures: 0,
      unexpected: 0,
      otherTypes: 0,
      firstVerifyError: undefined as string | undefined,
    };
    /** One window through the driver; its deliveries matched to its changes. */
    const runWindow = async (subscribed: boolean, mode: RunMode, count: number, concurrency: number, label: string): Promise<Window> => {
      await subscribe(subscribed);
      const run = await driver!.run({ mode, origin, token, chatInterfaceId, count, concurrency, label, secret, timeoutMs: remainingMs(), settleMs: SETTLE_MS });
      integrity.duplicates += run.duplicates;
      integrity.malformed += run.malformed;
      integrity.foreign += run.foreign;
      if (run.foreign > 0) log(`  ${run.foreign} requests to another path of the receiver's port (not from this service): ignored`);
      integrity.verified += run.verified;
      integrity.verifyFailures += run.verifyFailures;
      integrity.firstVerifyError ??= run.firstVerifyError;
      integrity.otherTypes += run.arrivals.filter((a) => a.type !== EVENT).length;
      if (!subscribed) {
        integrity.unexpected += run.arrivals.length;
        return { changes: run.changes, run, byDataId: new Map() };
      }
      const byDataId = new Map(run.arrivals.map((a) => [a.dataId, a]));
      const matched = run.changes.filter((ch) => byDataId.has(ch.id)).length;
      integrity.expected += run.changes.length;
      integrity.received += matched;
      integrity.missing += run.changes.length - matched;
      integrity.unexpected += run.arrivals.length - matched;
      return { changes: run.changes, run, byDataId };
    };

    const common = {
      bench: 'webhooks',
      event: EVENT,
      route: 'POST /api/v1/api-keys -> webhook POST to a node:http receiver on 127.0.0.1',
      database,
      webhook_concurrency: webhookConcurrency,
      host_cpus: availableParallelism(),
      load_avg_1m_start: loadAtStart,
    };
    const emitLatency = (phaseFields: Record<string, unknown>, windows: Window[]) => {
      const lat = e2eOf(kit, windows);
      for (const [name, s, definition] of [
        ['received', lat.received, 'change committed (API response at the client) -> the receiver has read the whole delivery'],
        ['acked', lat.acked, 'change committed (API response at the client) -> the receiver has handed its 200 to the OS'],
      ] as const) {
        for (const key of ['p50', 'p99'] as const) {
          kit.emit({
            ...common,
            ...phaseFields,
            metric: `e2e_${name}_${key}_ms`,
            value: round(s[key], 3),
            definition,
            baseline: 'receiver-handling',
            baseline_definition:
              "the receiver's own handling time, measured inside it: request headers parsed -> body read, JSON parsed, 200 handed to the OS ('finish')",
            baseline_value: round(lat.handling[key], 3),
            added_ms: round(s[key] - lat.handling[key], 3),
            added_definition: 'end-to-end minus receiver handling (same percentile): what the service and the loopback add',
            from_sent_ms: round(lat.fromSent[key], 3),
            mean_ms: round(s.mean, 3),
            deliveries: s.count,
            delivered_before_api_response: lat.beforeResponse,
          });
        }
      }
      return lat;
    };

    // ---- 0. warm-up -------------------------------------------------------------------------------------
    if (WARMUP_EVENTS > 0) {
      log(`warm-up: ${WARMUP_EVENTS} changes with the subscription, ${WARMUP_EVENTS} without`);
      const w = await runWindow(true, 'e2e', WARMUP_EVENTS, CONCURRENCY, 'warm-up');
      if (w.run.verifyFailures > 0) throw new Error(`signature verification failed: ${w.run.firstVerifyError}`);
      await runWindow(false, 'api-only', WARMUP_EVENTS, CONCURRENCY, 'warm-up baseline');
    }

    // ---- 1. isolated: one change at a time, the next after its delivery --------------------------------------
    let isolated: Window | undefined;
    if (ISOLATED_EVENTS > 0) {
      log(`isolated: ${ISOLATED_EVENTS} changes one at a time, each after the previous one's delivery`);
      isolated = await runWindow(true, 'e2e', ISOLATED_EVENTS, 1, 'isolated');
      const lat = emitLatency({ phase: 'isolated', concurrency: 1, events: ISOLATED_EVENTS }, [isolated]);
      log(`  e2e acked p50 ${lat.acked.p50.toFixed(2)} ms, p99 ${lat.acked.p99.toFixed(2)} ms; receiver handling p50 ${lat.handling.p50.toFixed(3)} ms`);
    }

    // ---- 2. sustained, alternating with the baseline -----------------------------------------------------
    const perRound = Math.max(1, Math.round(EVENTS / ROUNDS));
    log(`sustained: ${ROUNDS} rounds x ${perRound} changes per mode, ${CONCURRENCY} in flight`);
    type Measured = Window & { durationMs: number; apiMs: number; elu: number; cpuCores: number; delayP50Ms: number; delayP99Ms: number };
    const hookRounds: Measured[] = [];
    const baseRounds: Measured[] = [];
    for (let r = 0; r < ROUNDS; r++) {
      for (const subscribed of r % 2 === 0 ? [false, true] : [true, false]) {
        await subscribe(subscribed);
        const load = serviceLoad();
        const w = await runWindow(subscribed, subscribed ? 'e2e' : 'api-only', perRound, CONCURRENCY, `${subscribed ? 'hook' : 'base'} r${r}`);
        const { elu, cpuCores, delayP50Ms, delayP99Ms } = load.stop(); // the settle wait included: a slight underestimate
        const t = span(w.changes, w.run.arrivals);
        if (subscribed) {
          hookRounds.push({ ...w, durationMs: t.lastAck - t.first, apiMs: t.lastAnswer - t.first, elu, cpuCores, delayP50Ms, delayP99Ms });
          log(
            `  round ${r + 1} webhook: ${perRound} events in ${((t.lastAck - t.first) / 1000).toFixed(2)} s, service event loop ${(elu * 100).toFixed(0)} % busy ` +
              `(delay p50 ${delayP50Ms.toFixed(1)} ms), ${w.run.connections} receiver connections`,
          );
        } else {
          baseRounds.push({ ...w, durationMs: t.lastAnswer - t.first, apiMs: t.lastAnswer - t.first, elu, cpuCores, delayP50Ms, delayP99Ms });
          log(
            `  round ${r + 1} baseline: ${perRound} changes in ${((t.lastAnswer - t.first) / 1000).toFixed(2)} s, service event loop ${(elu * 100).toFixed(0)} % busy (delay p50 ${delayP50Ms.toFixed(1)} ms)`,
          );
        }
      }
    }

    const sustained = { phase: 'sustained', events: perRound * ROUNDS, rounds: ROUNDS, concurrency: CONCURRENCY };
    const total = (rs: Measured[]) => ({
      n: rs.reduce((n, r) => n + r.changes.length, 0),
      seconds: rs.reduce((s, r) => s + r.durationMs, 0) / 1000,
      elu: rs.reduce((s, r) => s + r.elu * r.durationMs, 0) / rs.reduce((s, r) => s + r.durationMs, 0),
      cpuMs: rs.reduce((s, r) => s + r.cpuCores * r.durationMs, 0),
    });
    const hookT = total(hookRounds);
    const baseT = total(baseRounds);
    kit.emit({
      ...common,
      ...sustained,
      metric: 'events_per_s',
      value: round(hookT.n / hookT.seconds, 1),
      definition: `events / (first API call sent -> last delivery acknowledged by the receiver), summed over the webhook rounds; ${CONCURRENCY} loops, each making a change and waiting for the receiver to acknowledge its delivery before the next`,
      baseline: 'no-webhook-subscribed',
      baseline_definition: `the same POST /api/v1/api-keys calls, ${CONCURRENCY} in flight, the webhook subscribed to ${OTHER_EVENT} instead: state changes per second alone (first sent -> last answered)`,
      baseline_value: round(baseT.n / baseT.seconds, 1),
      ratio: round(hookT.n / hookT.seconds / (baseT.n / baseT.seconds), 3),
      seconds: round(hookT.seconds, 3),
      baseline_seconds: round(baseT.seconds, 3),
      service_event_loop_utilization: round(hookT.elu, 3),
      baseline_service_event_loop_utilization: round(baseT.elu, 3),
      service_event_loop_delay_p50_ms: round(Math.max(...hookRounds.map((r) => r.delayP50Ms)), 1),
      service_event_loop_delay_p99_ms: round(Math.max(...hookRounds.map((r) => r.delayP99Ms)), 1),
      baseline_service_event_loop_delay_p50_ms: round(Math.max(...baseRounds.map((r) => r.delayP50Ms)), 1),
      baseline_service_event_loop_delay_p99_ms: round(Math.max(...baseRounds.map((r) => r.delayP99Ms)), 1),
      event_loop_delay_definition:
        'how late a 5 ms timer fired in the service process (perf_hooks.monitorEventLoopDelay), the worst round: how long ready I/O waits for the service',
      service_cpu_ms_per_event: round(hookT.cpuMs / hookT.n, 3),
      baseline_service_cpu_ms_per_change: round(baseT.cpuMs / baseT.n, 3),
      cpu_definition: 'user + system CPU of the service process (PGlite runs inside it; PostgreSQL does not) over the rounds, per event / change',
      receiver_connections: hookRounds.reduce((n, r) => n + r.run.connections, 0),
      load_avg_1m_end: kit.loadAverage(),
    });

    // The write path: API latency with and without a subscription.
    const hookApi = latencySummary(hookRounds.flatMap((r) => r.changes.map((c) => c.answeredMs - c.sentMs)));
    const baseApi = latencySummary(baseRounds.flatMap((r) => r.changes.map((c) => c.answeredMs - c.sentMs)));
    for (const key of ['p50', 'p99'] as const) {
      kit.emit({
        ...common,
        ...sustained,
        metric: `api_${key}_ms`,
        value: round(hookApi[key], 3),
        definition:
          'POST /api/v1/api-keys latency at the client in the webhook rounds (the change and its outbox rows, deliveries running in the same process and database)',
        baseline: 'no-webhook-subscribed',
        baseline_value: round(baseApi[key], 3),
        added_ms: round(hookApi[key] - baseApi[key], 3),
        mean_ms: round(hookApi.mean, 3),
        baseline_mean_ms: round(baseApi.mean, 3),
        requests: hookApi.count,
        baseline_requests: baseApi.count,
      });
    }
    const sustainedLat = emitLatency(sustained, hookRounds);
    log(`  e2e acked p50 ${sustainedLat.acked.p50.toFixed(1)} ms, p99 ${sustainedLat.acked.p99.toFixed(1)} ms at ${CONCURRENCY} in flight`);

    // ---- 3. burst ---------------------------------------------------------------------------------------
    let burst: Window | undefined;
    if (BURST_EVENTS > 0) {
      log(`burst: ${BURST_EVENTS} changes, ${BURST_CONCURRENCY} in flight, then until every delivery is acknowledged`);
      const load = serviceLoad();
      burst = await runWindow(true, 'burst', BURST_EVENTS, BURST_CONCURRENCY, 'burst');
      const { elu, delayP50Ms, delayP99Ms } = load.stop();
      const t = span(burst.changes, burst.run.arrivals);
      const backlog = burst.run.arrivals.filter((a) => a.ackMs > t.lastAnswer).length;
      const tailMs = t.lastAck - t.lastAnswer;
      const totalS = (t.lastAck - t.first) / 1000;
      const apiS = (t.lastAnswer - t.first) / 1000;
      const lat = e2eOf(kit, [burst]);
      log(
        `  API ${apiS.toFixed(2)} s, all acknowledged after ${totalS.toFixed(2)} s; backlog at the last API answer ${backlog}, drained in ${(tailMs / 1000).toFixed(2)} s`,
      );
      kit.emit({
        ...common,
        phase: 'burst',
        metric: 'burst_events_per_s',
        value: round(BURST_EVENTS / totalS, 1),
        definition: 'events / (first API call sent -> last delivery acknowledged)',
        baseline: 'burst-api-only',
        baseline_definition: "the same burst's state changes per second at the API (first sent -> last answered), deliveries running alongside",
        baseline_value: round(BURST_EVENTS / apiS, 1),
        ratio: round(apiS / totalS, 3),
        events: BURST_EVENTS,
        concurrency: BURST_CONCURRENCY,
        api_seconds: round(apiS, 3),
        seconds_to_all_acked: round(totalS, 3),
        backlog_at_last_api_answer: backlog,
        drain_tail_seconds: round(tailMs / 1000, 3),
        drain_events_per_s_after_api: backlog > 0 && tailMs > 0 ? round(backlog / (tailMs / 1000), 1) : null,
        drain_definition:
          'deliveries still unacknowledged when the last API call answered / time from then to the last acknowledgement (delivery alone, the API idle)',
        e2e_acked_p50_ms: round(lat.acked.p50, 3),
        e2e_acked_p99_ms: round(lat.acked.p99, 3),
        receiver_handling_p50_ms: round(lat.handling.p50, 3),
        receiver_handling_p99_ms: round(lat.handling.p99, 3),
        service_event_loop_utilization: round(elu, 3),
        service_event_loop_delay_p50_ms: round(delayP50Ms, 1),
        service_event_loop_delay_p99_ms: round(delayP99Ms, 1),
        receiver_connections: burst.run.connections,
        load_avg_1m_end: kit.loadAverage(),
      });
    }

    // ---- integrity --------------------------------------------------------------------------------------
    const rows = await db
      .selectFrom('webhook_deliveries')
      .select(['status'])
      .select((eb) => [eb.fn.countAll<number>().as('n'), eb.fn.sum<number>('attempt_count').as('attempts')])
      .where('webhook_id', '=', webhookId)
      .groupBy('status')
      .execute();
    const byStatus = Object.fromEntries(rows.map((r) => [r.status, Number(r.n)]));
    const attempts = rows.reduce((s, r) => s + Number(r.attempts), 0);
    kit.emit({
      ...common,
      metric: 'duplicates',
      value: integrity.duplicates,
      definition:
        'deliveries whose webhook-id the receiver had already acknowledged, over every window (warm-up, isolated, sustained, baseline, burst); expected 0',
      missing: integrity.missing,
      all_arrived: integrity.missing === 0,
      events_expected: integrity.expected,
      events_received: integrity.received,
      unexpected_deliveries: integrity.unexpected,
      unexpected_definition: 'deliveries matching no change of their window, the baseline windows (no subscription) included; expected 0',
      other_event_types: integrity.otherTypes,
      malformed_requests: integrity.malformed,
      foreign_requests: integrity.foreign,
      signatures_verified: integrity.verified,
      signature_failures: integrity.verifyFailures,
      ...(integrity.firstVerifyError ? { first_signature_error: integrity.firstVerifyError } : {}),
      verified_with: 'standardwebhooks Webhook.verify, every delivery, after each window (outside the timed handler)',
      deliveries_in_db: rows.reduce((s, r) => s + Number(r.n), 0),
      deliveries_by_status: byStatus,
      attempts_in_db: attempts,
      attempts_beyond_first: attempts - (byStatus.succeeded ?? 0),
    });
    const problems = [
      integrity.missing > 0 && `${integrity.missing} events never arrived`,
      integrity.duplicates > 0 && `${integrity.duplicates} duplicate deliveries`,
      integrity.unexpected > 0 && `${integrity.unexpected} unexpected deliveries`,
      integrity.malformed > 0 && `${integrity.malformed} malformed requests`,
      integrity.verifyFailures > 0 && `${integrity.verifyFailures} signatures did not verify (${integrity.firstVerifyError})`,
    ].filter(Boolean);
    if (problems.length > 0) {
      process.exitCode = 1;
      log(`integrity: ${problems.join('; ')}`);
    }

    // ---- where the time goes: the service's own attempt records on the same timeline -------------------------
    // attempts[0].at is the host's wall clock (ms); the figures above are CLOCK_MONOTONIC: map one onto the other.
    const offsets = Array.from({ length: 7 }, () => Date.now() - monoMs()).sort((a, b) => a - b);
    const wallMinusMono = offsets[3]!;
    const recorded = await db
      .selectFrom('webhook_deliveries as d')
      .innerJoin('webhook_events as e', 'e.id', 'd.event_id')
      .select(['e.body', 'd.attempts'])
      .where('d.webhook_id', '=', webhookId)
      .execute();
    const firstAttempt = new Map<string, { atMono: number; latencyMs: number }>();
    for (const row of recorded) {
      const first = row.attempts[0];
      if (first)
        firstAttempt.set((JSON.parse(row.body) as { data: { id: string } }).data.id, {
          atMono: Date.parse(first.at) - wallMinusMono,
          latencyMs: first.latencyMs,
        });
    }
    const profile = (phase: string, windows: Window[]) => {
      const toAttempt: number[] = [];
      const toReceiver: number[] = [];
      const http: number[] = [];
      const ackToSeen: number[] = [];
      for (const w of windows) {
        for (const ch of w.changes) {
          const a = w.byDataId.get(ch.id);
          const attempt = firstAttempt.get(ch.id);
          if (!a || !attempt) continue;
          toAttempt.push(attempt.atMono - ch.answeredMs);
          toReceiver.push(a.startMs - attempt.atMono);
          http.push(attempt.latencyMs);
          ackToSeen.push(attempt.atMono + attempt.latencyMs - a.ackMs);
        }
      }
      const t = latencySummary(toAttempt);
      const r = latencySummary(toReceiver);
      const h = latencySummary(http);
      const s = latencySummary(ackToSeen);
      const lat = e2eOf(kit, windows);
      kit.emit({
        bench: 'webhooks-profile',
        phase,
        metric: 'delivery_breakdown_ms',
        database,
        webhook_concurrency: webhookConcurrency,
        deliveries: t.count,
        commit_to_attempt_p50_ms: round(t.p50, 1),
        commit_to_attempt_p99_ms: round(t.p99, 1),
        commit_to_attempt_definition:
          "API response at the client -> the delivery attempt's start (attempts[0].at): wake-up, queue wait, claim, loading the delivery",
        attempt_to_receiver_p50_ms: round(r.p50, 1),
        attempt_to_receiver_p99_ms: round(r.p99, 1),
        attempt_to_receiver_definition:
          "attempt start -> the receiver's request event: signing, the guarded client (connection reuse or connect), the loopback",
        receiver_handling_p50_ms: round(lat.handling.p50, 3),
        ack_to_service_read_p50_ms: round(s.p50, 1),
        ack_to_service_read_p99_ms: round(s.p99, 1),
        ack_to_service_read_definition:
          "receiver acknowledged -> the service has read the answer (attempt start + attempts[0].latencyMs): the time a delivery worker waits for the service's own event loop; it holds a delivery slot but is not in the end-to-end figure",
        attempt_http_p50_ms: round(h.p50, 1),
        attempt_http_p99_ms: round(h.p99, 1),
        attempt_http_definition: "attempts[0].latencyMs: the service's own measure of the POST (send -> answer read)",
        e2e_acked_p50_ms: round(lat.acked.p50, 3),
        note: 'attempts[0].at has millisecond resolution (wall clock, mapped onto CLOCK_MONOTONIC): the parts are good to about 1 ms',
      });
    };
    if (isolated) profile('isolated', [isolated]);
    profile('sustained', hookRounds);
    if (burst) profile('burst', [burst]);
  } catch (error) {
    process.exitCode = 1;
    log(`failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
  } finally {
    await service?.cleanup();
    await driver?.close();
    clearTimeout(watchdog);
    log(`done in ${((performance.now() - started) / 1000).toFixed(1)} s`);
  }
}

if (process.env[DRIVER_ENV] === '1' && typeof process.send === 'function') {
  // Registered at once, so no job sent while the driver starts is missed; each waits for the start.
  const driver = startDriver();
  serveJobs<DriverJob, DriverResult>(async (job) => {
    const d = await driver;
    return job.cmd === 'start' ? { port: d.port, path: d.path } : d.runWindow(job);
  });
} else await main();
