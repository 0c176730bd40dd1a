import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateApiKey } from '../../routers/api-keys/key-format.ts';
import { createSecurityEventRecorder, databaseSecurityEventStore, type SecurityEventStore } from '../../routers/security-events/recorder.ts';
import type { NewSecurityEvent, SecurityEventCount } from '../../routers/security-events/repository.ts';
import { createLogger } from '../../adapters/outbound/logger.ts';
import { startTestApp, type TestApp } from '../helpers/test-app.ts';

/**
 * Security monitoring through the real listener: each hook records its event when provoked (a wrong password, a
 * made-up and a deactivated API key, a refused outbound address, a bad Stripe signature, the contact form's
 * honeypot, a 429), GET /api/v1/admin/security-monitoring reports them to admins only, and the recorder keeps counts
 * exact while it samples rows under a flood, gives visitors' events their interface's owner, and prunes old rows.
 */

const WEBHOOK_SECRET = 'whsec_security_monitoring_test';
const PASSWORD_TRIED = 'not-the-password-xyz';
const MONITORING = '/api/v1/admin/security-monitoring';

let app: TestApp;
let admin: { token: string; ownerId: string };
let owner: { token: string; ownerId: string; email: string };

beforeAll(async () => {
  app = await startTestApp({
    STRIPE_SECRET_KEY: 'sk_test_security_monitoring',
    STRIPE_WEBHOOK_SECRET: WEBHOOK_SECRET,
    SECURITY_EVENTS_RETENTION_DAYS: '30',
  });
  admin = await app.signUp('security-admin');
  owner = await app.signUp('security-owner');
  await app.deps.database.db.updateTable('owners').set({ role: 'admin' }).where('id', '=', admin.ownerId).execute();
});
afterAll(async () => {
  await app?.stop();
});

/** Flushes the recorder (deterministic; its timer would within a second) and reads the latest events of a kind. */
async function latest(kind: string, target: TestApp = app, token = admin.token) {
  await target.deps.securityEvents.flush();
  const res = await target.request('GET', `${MONITORING}?kind=${kind}&limit=200`, { token });
  expect(res.status, res.text).toBe(200);
  return res.body.data as {
    total: number;
    totals: Record<string, number>;
    events: Array<{ id: string; kind: string; ownerId: string | null; chatInterfaceId: string | null; ip: string | null; detail: Record<string, unknown> }>;
  };
}

async function interfaceWithKey(token: string) {
  const iface = await app.request('POST', '/api/v1/chat-interfaces', { token, body: { name: 'Monitored' } });
  expect(iface.status, iface.text).toBe(201);
  const key = await app.request('POST', '/api/v1/api-keys', { token, body: { name: 'monitored', chatInterfaceId: iface.body.data.chatInterface.id } });
  expect(key.status, key.text).toBe(201);
  return { interfaceId: iface.body.data.chatInterface.id as string, keyId: key.body.data.apiKey.id as string, key: key.body.data.key as string };
}

describe('each hook records its event', () => {
  it('a failed sign-in: the email’s domain, the owner and the client address, never the password', async () => {
    const res = await app.request('POST', '/api/v1/auth/sign-in', { body: { email: owner.email, password: PASSWORD_TRIED } });
    expect(res.status).toBe(401);
    expect((await app.request('POST', '/api/v1/auth/sign-in', { body: { email: 'nobody@unknown.example', password: PASSWORD_TRIED } })).status).toBe(401);
    const { events, totals } = await latest('sign_in_failed');
    expect(totals.sign_in_failed).toBe(2);
    const mine = events.find((e) => e.ownerId === owner.ownerId);
    expect(mine).toMatchObject({ kind: 'sign_in_failed', detail: { emailDomain: 'example.com' } });
    expect(mine?.ip).toBeTruthy();
    expect(events.find((e) => e.ownerId === null)?.detail).toEqual({ emailDomain: 'unknown.example' });
    expect(JSON.stringify(events)).not.toContain(PASSWORD_TRIED);
    expect(JSON.stringify(events)).not.toContain(owner.email);
  });

  it('a made-up and a malformed API key are api_key_invalid with at most 8 characters of the key', async () => {
    const madeUp = generateApiKey();
    const malformed = `svc_${'Q'.repeat(38)}`;
    for (const token of [madeUp, malformed]) expect((await app.request('GET', '/api/v1/auth/me', { token })).status).toBe(401);
    const { events } = await latest('api_key_invalid');
    expect(events.map((e) => e.detail.key).sort()).toEqual([madeUp.slice(0, 8), malformed.slice(0, 8)].sort());
    expect(events.find((e) => e.detail.malformed === true)?.detail.key).toBe('svc_QQQQ');
    expect(events.every((e) => e.ownerId === null && e.chatInterfaceId === null)).toBe(true);
    expect(events.every((e) => typeof e.ip === 'string' && e.ip.length > 0)).toBe(true);
    expect(JSON.stringify(events)).not.toContain(madeUp);
  });

  it('a deactivated key is api_key_revoked, with its owner and interface', async () => {
    const { interfaceId, keyId, key } = await interfaceWithKey(owner.token);
    expect((await app.request('PATCH', `/api/v1/api-keys/${keyId}`, { token: owner.token, body: { active: false } })).status).toBe(200);
    expect((await app.request('GET', '/api/v1/chat-messages/history?sessionId=x', { token: key })).status).toBe(401);
    const { events } = await latest('api_key_revoked');
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({ ownerId: owner.ownerId, chatInterfaceId: interfaceId, ip: expect.any(String), detail: { key: key.slice(0, 8) } });
    expect(JSON.stringify(events)).not.toContain(key);
  });

  it('an address the outbound guard refuses is outbound_blocked, with the host only', async () => {
    const res = await app.request('POST', '/api/v1/chat-interfaces', {
      token: owner.token,
      body: { name: 'ssrf', endpointUrl: 'http://169.254.169.254/latest/meta-data?token=abc' },
    });
    expect(res.status).toBe(400);
    const { events } = await latest('outbound_blocked');
    expect(events).toHaveLength(1);
    expect(events[0]?.detail).toEqual({ host: '169.254.169.254' });
    expect(JSON.stringify(events)).not.toContain('meta-data');
  });

  it('a Stripe webhook with a bad signature is billing_signature_invalid', async () => {
    const res = await app.request('POST', '/api/v1/payments/webhook', {
      rawBody: Buffer.from('{"id":"evt_forged","type":"checkout.session.completed"}'),
      headers: { 'content-type': 'application/json', 'stripe-signature': `t=${Math.floor(Date.now() / 1000)},v1=${'0'.repeat(64)}` },
    });
    expect(res.status).toBe(400);
    const { events } = await latest('billing_signature_invalid');
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({ detail: { signed: true } });
    expect(events[0]?.ip).toBeTruthy();
  });

  it('the contact form’s honeypot is honeypot_hit', async () => {
    const res = await app.request('POST', '/api/v1/support/contact', {
      body: { name: 'Bot', email: 'bot@spam.example', subject: 'Buy', message: 'Cheap', website: 'http://spam.example' },
    });
    expect(res.status).toBe(202);
    const { events } = await latest('honeypot_hit');
    expect(events).toHaveLength(1);
    expect(events[0]?.detail).toEqual({ emailDomain: 'spam.example' });
  });

  it('a 429 is rate_limited, with the limit’s name and the caller’s owner and interface', async () => {
    const limited = await startTestApp({ RATE_LIMIT_DEFAULT: '3', RATE_LIMIT_CHAT: '3' });
    try {
      const boss = await limited.signUp('limited-admin');
      await limited.deps.database.db.updateTable('owners').set({ role: 'admin' }).where('id', '=', boss.ownerId).execute();
      const someone = await limited.signUp('limited-owner');
      let last = 0;
      for (let i = 0; i < 4; i++) last = (await limited.request('GET', '/api/v1/auth/me', { token: someone.token })).status;
      expect(last).toBe(429);
      const iface = await limited.request('POST', '/api/v1/chat-interfaces', { token: someone.token, body: { name: 'Limited' } });
      const interfaceId = iface.body.data.chatInterface.id as string;
      const key = (await limited.request('POST', '/api/v1/api-keys', { token: someone.token, body: { name: 'k', chatInterfaceId: interfaceId } })).body.data
        .key;
      for (let i = 0; i < 4; i++) last = (await limited.request('GET', '/api/v1/chat-messages/history?sessionId=x', { token: key })).status;
      expect(last).toBe(429);

      const { events, totals } = await latest('rate_limited', limited, boss.token);
      expect(totals.rate_limited).toBe(2);
      expect(events.find((e) => e.chatInterfaceId === null)).toMatchObject({ ownerId: someone.ownerId, detail: { limit: 'default:auth.me' } });
      expect(events.find((e) => e.chatInterfaceId !== null)).toMatchObject({ ownerId: someone.ownerId, chatInterfaceId: interfaceId });
      // The per-interface figure another area reads (GET /api/v1/monitoring), exactly as it asks for it.
      const counts = await limited.deps.database.db
        .selectFrom('security_event_counts')
        .select(['chat_interface_id', (eb) => eb.fn.sum<string>('count').as('n')])
        .where('kind', '=', 'rate_limited')
        .where('owner_id', '=', someone.ownerId)
        .groupBy('chat_interface_id')
        .execute();
      expect(Object.fromEntries(counts.map((c) => [c.chat_interface_id, Number(c.n)]))).toEqual({
        '00000000-0000-0000-0000-000000000000': 1,
        [interfaceId]: 1,
      });
    } finally {
      await limited.stop();
    }
  });
});

describe('GET /api/v1/admin/security-monitoring', () => {
  it('answers totals, a dense hourly series, the latest events and the retention', async () => {
    await app.deps.securityEvents.flush();
    const res = await app.request('GET', MONITORING, { token: admin.token });
    expect(res.status, res.text).toBe(200);
    const data = res.body.data;
    expect(data.retentionDays).toBe(30);
    expect(data.granularity).toBe('hour');
    expect(new Date(data.to).getTime() - new Date(data.from).getTime()).toBe(24 * 3_600_000);
    expect(data.series.length).toBeGreaterThanOrEqual(24);
    expect(data.series.length).toBeLessThanOrEqual(25);
    expect(data.series.reduce((sum: number, b: { total: number }) => sum + b.total, 0)).toBe(data.total);
    expect(Object.values(data.totals).reduce((sum: number, n) => sum + (n as number), 0)).toBe(data.total);
    expect(data.totals).toMatchObject({
      sign_in_failed: 2,
      api_key_invalid: 2,
      api_key_revoked: 1,
      outbound_blocked: 1,
      billing_signature_invalid: 1,
      honeypot_hit: 1,
    });
    expect(data.events.length).toBe(Math.min(50, data.total));
    const times = data.events.map((e: { occurredAt: string }) => e.occurredAt);
    expect([...times].sort().reverse()).toEqual(times);
  });

  it('is daily beyond 7 days, and a range that holds none of the events counts nothing', async () => {
    const to = new Date();
    const from = new Date(to.getTime() - 10 * 24 * 3_600_000);
    const daily = await app.request('GET', `${MONITORING}?from=${from.toISOString()}&to=${to.toISOString()}&limit=1`, { token: admin.token });
    expect(daily.status, daily.text).toBe(200);
    expect(daily.body.data.granularity).toBe('day');
    expect(daily.body.data.series.length).toBeGreaterThanOrEqual(10);
    expect(daily.body.data.series.length).toBeLessThanOrEqual(11);
    expect(daily.body.data.events).toHaveLength(1);
    const past = await app.request('GET', `${MONITORING}?from=2020-01-01T00:00:00Z&to=2020-01-02T00:00:00Z`, { token: admin.token });
    expect(past.status).toBe(200);
    expect(past.body.data).toMatchObject({ total: 0, events: [] });
    expect(past.body.data.series).toHaveLength(24);
  });

  it('is for admins: 401 without a session, 403 for an owner', async () => {
    expect((await app.request('GET', MONITORING)).status).toBe(401);
    expect((await app.request('GET', MONITORING, { token: owner.token })).status).toBe(403);
  });

  it('400 for a bad range, kind or limit', async () => {
    const now = Date.now();
    const iso = (ms: number) => new Date(ms).toISOString();
    for (const query of [
      `from=${iso(now)}&to=${iso(now)}`,
      `from=${iso(now)}&to=${iso(now - 1000)}`,
      `from=${iso(now - 91 * 24 * 3_600_000)}&to=${iso(now)}`,
      `from=${iso(now - 91 * 24 * 3_600_000)}`,
      `from=${iso(now + 3_600_000)}`,
      'from=yesterday',
      'kind=password_guessed',
      'limit=0',
      'limit=201',
      'limit=0x10',
    ]) {
      const res = await app.request('GET', `${MONITORING}?${query}`, { token: admin.token });
      expect(res.status, query).toBe(400);
      expect(res.body.error.code, query).toBe('VALIDATION_FAILED');
    }
  });
});

describe('the recorder', () => {
  const quietLogger = (lines: string[]) => createLogger('debug', (line) => lines.push(line));

  it('keeps counts exact beyond the row cap and shares the rows fairly between kinds', async () => {
    const written: Array<{ events: NewSecurityEvent[]; counts: SecurityEventCount[] }> = [];
    const store: SecurityEventStore = { write: async (events, counts) => void written.push({ events, counts }), prune: async () => ({ events: 0, counts: 0 }) };
    const lines: string[] = [];
    const recorder = createSecurityEventRecorder({ store, logger: quietLogger(lines), retentionDays: 30, maxRowsPerFlush: 200 });
    const ownerId = randomUUID();
    for (let i = 0; i < 5_000; i++) recorder.record('rate_limited', { ownerId, ip: '203.0.113.9', detail: { limit: 'default:auth.me' } });
    for (let i = 0; i < 3; i++) recorder.record('honeypot_hit', { ip: '203.0.113.10' });
    await recorder.flush();
    expect(written).toHaveLength(1);
    const [batch] = written;
    expect(batch!.events).toHaveLength(200);
    expect(batch!.events.filter((e) => e.kind === 'honeypot_hit')).toHaveLength(3);
    expect(batch!.counts.reduce((sum, c) => sum + c.count, 0)).toBe(5_003);
    expect(batch!.counts.find((c) => c.kind === 'rate_limited')).toMatchObject({ owner_id: ownerId, count: 5_000 });
    expect(lines.some((l) => l.includes('security events sampled') && l.includes('"rowsDropped":4803'))).toBe(true);
    await recorder.flush();
    expect(written).toHaveLength(1);
  });

  it('a failed write gives up its rows but keeps its counts for the next flush', async () => {
    const written: SecurityEventCount[][] = [];
    let failures = 1;
    const store: SecurityEventStore = {
      write: async (_events, counts) => {
        if (failures-- > 0) throw new Error('database down');
        written.push(counts);
      },
      prune: async () => ({ events: 0, counts: 0 }),
    };
    const lines: string[] = [];
    const recorder = createSecurityEventRecorder({ store, logger: quietLogger(lines), retentionDays: 30 });
    for (let i = 0; i < 7; i++) recorder.record('api_key_invalid');
    await recorder.flush();
    expect(lines.some((l) => l.includes('security events not written'))).toBe(true);
    await recorder.flush();
    expect(written.flat().reduce((sum, c) => sum + c.count, 0)).toBe(7);
  });

  it('never throws, drops ids that are not uuids and cuts token-like text to 8 characters', async () => {
    const written: NewSecurityEvent[] = [];
    const store: SecurityEventStore = { write: async (events) => void written.push(...events), prune: async () => ({ events: 0, counts: 0 }) };
    const recorder = createSecurityEventRecorder({ store, logger: quietLogger([]), retentionDays: 30 });
    const secret = `Bearer ${'x'.repeat(43)}`;
    expect(() => recorder.record('sign_in_failed', { ownerId: 'not-a-uuid', detail: { note: secret, long: 'y '.repeat(500) } })).not.toThrow();
    await recorder.flush();
    expect(written[0]).toMatchObject({ owner_id: null, detail: { note: 'Bearer xxxxxxxx…' } });
    expect(String(written[0]!.detail.long).length).toBeLessThanOrEqual(120);
  });

  it('writes to the database in one statement: exact counts, a visitor’s event gets its interface’s owner', async () => {
    const { interfaceId } = await interfaceWithKey(owner.token);
    const lines: string[] = [];
    const recorder = createSecurityEventRecorder({ store: databaseSecurityEventStore(app.deps.database.db), logger: quietLogger(lines), retentionDays: 30 });
    for (let i = 0; i < 450; i++) recorder.record('rate_limited', { chatInterfaceId: interfaceId, detail: { limit: 'visitorIp' } });
    await recorder.flush();
    for (let i = 0; i < 5; i++) recorder.record('rate_limited', { chatInterfaceId: interfaceId, detail: { limit: 'visitorIp' } });
    await recorder.close();
    const db = app.deps.database.db;
    const counts = await db.selectFrom('security_event_counts').selectAll().where('chat_interface_id', '=', interfaceId).execute();
    // One row per hour (two if the test ran across an hour boundary), all of them the interface owner's.
    expect(counts.every((c) => c.owner_id === owner.ownerId && c.kind === 'rate_limited')).toBe(true);
    expect(counts.reduce((sum, c) => sum + Number(c.count), 0)).toBe(455);
    const rows = await db.selectFrom('security_events').select(['owner_id']).where('chat_interface_id', '=', interfaceId).execute();
    expect(rows).toHaveLength(205);
    expect(rows.every((r) => r.owner_id === owner.ownerId)).toBe(true);
  });

  it('retention deletes events and counts older than SECURITY_EVENTS_RETENTION_DAYS, and is idempotent', async () => {
    const ownerId = randomUUID();
    const db = app.deps.database.db;
    const at = (daysAgo: number) =>
      createSecurityEventRecorder({
        store: databaseSecurityEventStore(db),
        logger: quietLogger([]),
        retentionDays: 30,
        now: () => Date.now() - daysAgo * 24 * 3_600_000,
      });
    for (const daysAgo of [45, 31, 29]) {
      const recorder = at(daysAgo);
      recorder.record('sign_in_failed', { ownerId, detail: { daysAgo } });
      await recorder.close();
    }
    const left = async () => ({
      events: (await db.selectFrom('security_events').select('detail').where('owner_id', '=', ownerId).execute()).map((r) => r.detail.daysAgo),
      counts: (await db.selectFrom('security_event_counts').select('hour').where('owner_id', '=', ownerId).execute()).length,
    });
    expect(await left()).toEqual({ events: expect.arrayContaining([45, 31, 29]), counts: 3 });
    const pruned = await app.deps.securityEvents.prune();
    expect(pruned.events).toBeGreaterThanOrEqual(2);
    expect(await left()).toEqual({ events: [29], counts: 1 });
    // A second instance running it at the same moment finds nothing more to delete.
    const again = await Promise.all([app.deps.securityEvents.prune(), app.deps.securityEvents.prune()]);
    expect(again.map((r) => r.events)).toEqual([0, 0]);
    expect(await left()).toEqual({ events: [29], counts: 1 });
  });
});
