import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/test-app.ts';
import { sseEvents } from '../helpers/sse.ts';
import { sql } from 'kysely';
import { visitorSketches } from '../../routers/dashboard/repository.ts';
import { estimateDistinct, mergeSketch, SKETCH_REGISTERS } from '../../routers/dashboard/visitor-sketch.ts';

/**
 * GET /api/v1/dashboard and GET /api/v1/monitoring through the listener, checked against a known set of
 * conversations: owner A talks to an external endpoint (which also fails in each way monitoring tells apart) and
 * to a knowledge base (answered and unanswered questions, a lead, a booking); owner B's traffic never shows in A's
 * figures; GraphQL carries the same figures.
 */

type Mode = 'ok' | 'http-500' | 'auth-401' | 'not-json' | 'hang';
let mode: Mode = 'ok';
let upstream: Server;
let port: number;
let app: TestApp;
let a: { token: string; ownerId: string };
let b: { token: string; ownerId: string };
let endpointIface: { id: string; slug: string; key: string };
let kbIface: { id: string; slug: string; key: string };
let bIface: { id: string; slug: string; key: string };
let configId: string;
const today = new Date().toISOString().slice(0, 10);

async function makeInterface(token: string, body: Record<string, unknown>) {
  const ci = await app.request('POST', '/api/v1/chat-interfaces', { token, body });
  expect(ci.status, ci.text).toBe(201);
  const key = await app.request('POST', '/api/v1/api-keys', { token, body: { name: 'k', chatInterfaceId: ci.body.data.chatInterface.id } });
  expect(key.status, key.text).toBe(201);
  return { id: ci.body.data.chatInterface.id as string, slug: ci.body.data.chatInterface.slug as string, key: key.body.data.key as string };
}

async function chat(iface: { slug: string; key: string }, message: string, sessionId?: string) {
  const res = await app.request('POST', `/api/v1/chat/${iface.slug}`, { token: iface.key, body: { message, ...(sessionId ? { sessionId } : {}) } });
  return res;
}

beforeAll(async () => {
  upstream = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      if (req.url === '/hook-ok') return void res.writeHead(200).end('ok');
      if (req.url === '/hook-fail') return void res.writeHead(500).end('down');
      if (mode === 'hang') return void setTimeout(() => res.writeHead(200).end('{}'), 3_000).unref();
      if (mode === 'http-500') return void res.writeHead(500, { 'content-type': 'text/plain' }).end('boom');
      if (mode === 'auth-401') return void res.writeHead(401, { 'content-type': 'application/json' }).end('{"error":"bad key"}');
      if (mode === 'not-json') return void res.writeHead(200, { 'content-type': 'text/html' }).end('<html>maintenance</html>');
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ response: 'Hello from the bot' }));
    });
  });
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  port = (upstream.address() as AddressInfo).port;
  app = await startTestApp({
    OUTBOUND_ALLOW_HOSTS: `127.0.0.1:${port}`,
    OUTBOUND_TIMEOUT_MS: '1000',
    RATE_LIMIT_DEFAULT: '10000',
    RATE_LIMIT_CHAT: '10000',
    DASHBOARD_EXACT_VISITOR_DAYS: '1000',
  });
  a = await app.signUp('dash-a');
  b = await app.signUp('dash-b');
  endpointIface = await makeInterface(a.token, { name: 'Bot', endpointUrl: `http://127.0.0.1:${port}/bot` });
  const kb = await app.request('POST', '/api/v1/knowledge-base/configs', { token: a.token, body: { name: 'Help' } });
  expect(kb.status, kb.text).toBe(201);
  configId = kb.body.data.config.id;
  const tools = await app.request('PATCH', `/api/v1/knowledge-base/configs/${configId}/tools`, {
    token: a.token,
    body: { tools: [{ name: 'lead_capture', enabled: true }] },
  });
  expect(tools.status, tools.text).toBe(200);
  const up = await app.upload('/api/v1/knowledge-base/documents', {
    token: a.token,
    fileName: 'returns.txt',
    bytes: Buffer.from('Returns are accepted within 30 days of delivery. Refunds reach your card in five days.'),
    fields: { configId },
  });
  expect(up.status, up.text).toBe(201);
  for (let i = 0; ; i++) {
    const docs = await app.request('GET', `/api/v1/knowledge-base/documents?configId=${configId}`, { token: a.token });
    if (docs.body.data.documents[0].status === 'completed') break;
    if (i > 300) throw new Error('document never completed');
    await new Promise((r) => setTimeout(r, 100));
  }
  kbIface = await makeInterface(a.token, { name: 'Help desk', configId, public: true });
  bIface = await makeInterface(b.token, { name: 'B bot', endpointUrl: `http://127.0.0.1:${port}/bot` });

  // Owner A, external endpoint: two conversations (3 turns and 1), then one failure of each kind.
  const first = await chat(endpointIface, 'hi');
  expect(first.status, first.text).toBe(200);
  expect((await chat(endpointIface, 'and then?', first.body.sessionId)).status).toBe(200);
  expect((await chat(endpointIface, 'thanks', first.body.sessionId)).status).toBe(200);
  expect((await chat(endpointIface, 'another visitor')).status).toBe(200);
  for (const [m, status] of [
    ['http-500', 502],
    ['auth-401', 502],
    ['not-json', 502],
    ['hang', 504],
  ] as const) {
    mode = m;
    const failed = await chat(endpointIface, 'will fail');
    expect(failed.status, `${m}: ${failed.text}`).toBe(status);
  }
  mode = 'ok';

  // Owner A, knowledge base: one conversation of three turns, two of them without a good source (one question,
  // written twice with different case and spacing); then a streamed turn in a new conversation.
  const kbFirst = await chat(kbIface, 'When are returns accepted?');
  expect(kbFirst.status, kbFirst.text).toBe(200);
  expect((await chat(kbIface, 'Do you sell zebra saddles?', kbFirst.body.sessionId)).status).toBe(200);
  expect((await chat(kbIface, '  do you SELL zebra   saddles? ', kbFirst.body.sessionId)).status).toBe(200);
  const streamed = await app.request('POST', `/api/v1/chat/${kbIface.slug}`, {
    token: kbIface.key,
    body: { message: 'How do refunds reach my card?' },
    headers: { accept: 'text/event-stream' },
  });
  expect(streamed.status, streamed.text).toBe(200);
  expect(sseEvents(streamed).some((e) => e.type === 'complete')).toBe(true);

  // A visitor of the public page asks to be contacted and leaves a lead.
  const visitor = await app.request('POST', `/api/v1/chat/${kbIface.slug}/visitor-sessions`, { body: {} });
  expect(visitor.status).toBe(201);
  const asked = await app.request('POST', `/api/v1/chat/${kbIface.slug}/visitor-messages`, {
    token: visitor.body.data.token,
    body: { message: 'Can someone contact me? Please call me back.' },
  });
  expect(asked.status, asked.text).toBe(200);
  const lead = await app.request('POST', `/api/v1/chat/${kbIface.slug}/leads`, {
    token: visitor.body.data.token,
    body: { sessionId: asked.body.sessionId, fields: { name: 'Ada Lovelace', email: 'ada@example.com' } },
  });
  expect(lead.status, lead.text).toBe(201);

  // A booking on the knowledge-base interface, and a direct knowledge-base query with no good source.
  const booking = await app.request('POST', '/api/v1/bookings/manual', {
    token: a.token,
    body: { chatInterfaceId: kbIface.id, attendee: { name: 'Grace', email: 'grace@example.com' }, start: '2027-03-22T10:00:00Z', end: '2027-03-22T10:30:00Z' },
  });
  expect(booking.status, booking.text).toBe(201);
  const query = await app.request('POST', '/api/v1/knowledge-base/query', { token: a.token, body: { configId, query: 'Unicorn insurance?' } });
  expect(query.status, query.text).toBe(200);

  // Owner B: traffic that must never show in A's figures.
  expect((await chat(bIface, 'b says hi')).status).toBe(200);
  expect((await chat(bIface, 'b again')).status).toBe(200);
});
afterAll(async () => {
  await app?.stop();
  await new Promise((r) => upstream?.close(r));
});

describe('dashboard', () => {
  it('totals and today’s point match the conversations above; B’s traffic is not there', async () => {
    const res = await app.request('GET', '/api/v1/dashboard', { token: a.token });
    expect(res.status, res.text).toBe(200);
    const d = res.body.data;
    expect(d.range).toMatchObject({ to: today, timeZone: 'UTC', groupBy: 'day' });
    expect(d.series).toHaveLength(30);
    // Turns: 4 endpoint + 4 knowledge base (3 + streamed) + 1 visitor = 9 answered; failures store nothing.
    // Conversations: 2 endpoint + 2 knowledge base + 1 visitor. Visitors: a session each for API-key chats, the visitor token.
    expect(d.totals).toMatchObject({
      conversations: 5,
      messages: 9,
      replies: 9,
      uniqueVisitors: 5,
      // 5 knowledge-base turns (4 by key, 1 by the visitor) + 1 direct query.
      knowledgeBaseQueries: 6,
      // zebra twice, the visitor's "contact me" (no document mentions it), unicorn once.
      unanswered: 4,
      leads: 1,
      bookings: 1,
    });
    expect(d.totals.tokensIn).toBeGreaterThan(0);
    expect(d.totals.tokensOut).toBeGreaterThan(0);
    const point = d.series.at(-1);
    expect(point).toMatchObject({ period: today, conversations: 5, messages: 9, uniqueVisitors: 5, leads: 1, bookings: 1 });
    expect(d.series.slice(0, -1).every((p: { messages: number }) => p.messages === 0)).toBe(true);
    expect(d.topUnansweredQuestions[0]).toEqual({ question: 'do you sell zebra saddles?', count: 2 });
    expect(d.topUnansweredQuestions.map((q: { question: string }) => q.question)).toEqual(
      expect.arrayContaining(['unicorn insurance?', 'can someone contact me? please call me back.']),
    );
    expect(d.documents).toEqual({ processing: 0, completed: 1, failed: 0, total: 1 });
    expect(d.usage).toMatchObject({ plan: 'free', messages: 9, queries: 1, documents: 1 });
  });

  it('narrows to one interface, and groups by week and month', async () => {
    const one = await app.request('GET', `/api/v1/dashboard?chatInterfaceId=${endpointIface.id}`, { token: a.token });
    expect(one.status, one.text).toBe(200);
    expect(one.body.data.totals).toMatchObject({ conversations: 2, messages: 4, uniqueVisitors: 2, knowledgeBaseQueries: 0, unanswered: 0, leads: 0 });
    expect(one.body.data.documents).toEqual({ processing: 0, completed: 0, failed: 0, total: 0 });
    const kb = await app.request('GET', `/api/v1/dashboard?chatInterfaceId=${kbIface.id}`, { token: a.token });
    expect(kb.body.data.totals).toMatchObject({ conversations: 3, messages: 5, knowledgeBaseQueries: 5, unanswered: 3, leads: 1, bookings: 1 });
    expect(kb.body.data.documents.completed).toBe(1);

    const weekly = await app.request('GET', `/api/v1/dashboard?groupBy=week&from=${today}&to=${today}`, { token: a.token });
    expect(weekly.status, weekly.text).toBe(200);
    expect(weekly.body.data.series).toHaveLength(1);
    expect(weekly.body.data.series[0]).toMatchObject({ messages: 9, uniqueVisitors: 5 });
    expect(new Date(`${weekly.body.data.series[0].period}T00:00:00Z`).getUTCDay()).toBe(1);
    const monthly = await app.request('GET', `/api/v1/dashboard?groupBy=month&from=${today.slice(0, 8)}01&to=${today}`, { token: a.token });
    expect(monthly.body.data.series).toEqual([expect.objectContaining({ period: `${today.slice(0, 8)}01`, messages: 9 })]);
    const past = await app.request('GET', '/api/v1/dashboard?from=2025-01-01&to=2025-01-31', { token: a.token });
    expect(past.body.data.totals).toMatchObject({ messages: 0, uniqueVisitors: 0 });
    expect(past.body.data.series).toHaveLength(31);
  });

  it('owner B sees only B’s figures; another owner’s interface is a 404', async () => {
    const res = await app.request('GET', '/api/v1/dashboard', { token: b.token });
    expect(res.body.data.totals).toMatchObject({ conversations: 2, messages: 2, leads: 0, bookings: 0, knowledgeBaseQueries: 0 });
    expect(res.body.data.topUnansweredQuestions).toEqual([]);
    for (const path of [`/api/v1/dashboard?chatInterfaceId=${endpointIface.id}`, `/api/v1/monitoring?chatInterfaceId=${endpointIface.id}`]) {
      const other = await app.request('GET', path, { token: b.token });
      expect(other.status, other.text).toBe(404);
      expect(other.body.error.code).toBe('NOT_FOUND');
    }
    expect((await app.request('GET', '/api/v1/dashboard?chatInterfaceId=not-an-id', { token: a.token })).status).toBe(404);
  });

  it('refuses bad ranges with 400 naming the field, and callers without a session', async () => {
    for (const [query, field] of [
      ['from=2026-02-30', 'from'],
      ['to=yesterday', 'to'],
      ['from=2026-05-02&to=2026-05-01', 'from'],
      ['from=2024-01-01&to=2026-01-01', 'from'],
      ['groupBy=hour', 'groupBy'],
      ['from=1999-12-31&to=2000-01-02', 'from'],
    ]) {
      const res = await app.request('GET', `/api/v1/dashboard?${query}`, { token: a.token });
      expect(res.status, query).toBe(400);
      expect(res.body.error.details, query).toContain(field);
    }
    expect((await app.request('GET', '/api/v1/monitoring?to=2026-13-01', { token: a.token })).status).toBe(400);
    expect((await app.request('GET', '/api/v1/dashboard')).status).toBe(401);
    expect((await app.request('GET', '/api/v1/monitoring')).status).toBe(401);
    // An API key is not an owner session.
    expect((await app.request('GET', '/api/v1/dashboard', { token: endpointIface.key })).status).toBe(403);
    expect((await app.request('GET', '/api/v1/monitoring', { token: endpointIface.key })).status).toBe(403);
  });
});

describe('monitoring', () => {
  it('per interface: calls, latency percentiles, errors by kind; owner-wide webhooks, documents and backlog', async () => {
    const res = await app.request('GET', '/api/v1/monitoring', { token: a.token });
    expect(res.status, res.text).toBe(200);
    const m = res.body.data;
    const bot = m.interfaces.find((i: { chatInterfaceId: string }) => i.chatInterfaceId === endpointIface.id);
    expect(bot).toMatchObject({
      name: 'Bot',
      backend: 'endpoint',
      calls: 8,
      errors: { connection: 0, timeout: 1, invalid_response: 1, auth: 1, http: 1 },
      errorRate: 0.5,
      rateLimited: 0,
    });
    expect(bot.latencyP50Ms).toBeGreaterThan(0);
    // The timed-out call waited the 1 s timeout: the slowest tenth of the calls is at least that.
    expect(bot.latencyP95Ms).toBeGreaterThanOrEqual(800);
    expect(bot.latencyP95Ms).toBeGreaterThanOrEqual(bot.latencyP50Ms);
    const help = m.interfaces.find((i: { chatInterfaceId: string }) => i.chatInterfaceId === kbIface.id);
    expect(help).toMatchObject({ backend: 'knowledge_base', calls: 5, errorRate: 0 });
    expect(m.interfaces).toHaveLength(2);
    expect(m.documents).toEqual({ failed: 0 });
    expect(m.webhooks).toEqual({ delivered: 0, failed: 0, successRate: null });
    expect(m.backlog).toMatchObject({ documentsProcessing: 0, webhookDeliveriesPending: 0 });

    const b2 = await app.request('GET', '/api/v1/monitoring', { token: b.token });
    expect(b2.body.data.interfaces).toEqual([expect.objectContaining({ chatInterfaceId: bIface.id, calls: 2, errorRate: 0 })]);
  });

  it('GraphQL carries the same figures, with the range and grouping as arguments', async () => {
    const query = `{ dashboard(groupBy: week, from: "${today}", to: "${today}") { groupBy totals { messages conversations uniqueVisitors unanswered leads }
      series { period messages } topUnansweredQuestions { question count } }
      monitoring(chatInterfaceId: "${endpointIface.id}") { interfaces { name calls errorRate errors { timeout invalidResponse auth http } } } }`;
    const res = await app.request('POST', '/graphql', { token: a.token, body: { query } });
    expect(res.status, res.text).toBe(200);
    expect(res.body.errors).toBeUndefined();
    expect(res.body.data.dashboard).toMatchObject({ groupBy: 'week', totals: { messages: 9, conversations: 5, uniqueVisitors: 5, unanswered: 4, leads: 1 } });
    expect(res.body.data.dashboard.series).toHaveLength(1);
    expect(res.body.data.monitoring.interfaces).toEqual([
      { name: 'Bot', calls: 8, errorRate: 0.5, errors: { timeout: 1, invalidResponse: 1, auth: 1, http: 1 } },
    ]);
    const bad = await app.request('POST', '/graphql', { token: a.token, body: { query: '{ dashboard(from: "2026-02-30") { totals { messages } } }' } });
    expect(bad.body.errors[0].extensions.code).toBe('VALIDATION_FAILED');
  });
});

describe('distinct visitors at volume', () => {
  it('past DASHBOARD_EXACT_VISITOR_DAYS the range’s visitors are estimated from the daily sketches, within 10%', async () => {
    const c = await app.signUp('dash-volume');
    const iface = await makeInterface(c.token, { name: 'Busy' });
    // 3,000 distinct visitors today, through the same database function the chat turn calls.
    await sql`select count(*) from (select count_activity(${c.ownerId}::uuid, ${iface.id}::uuid, jsonb_build_object('visitor', 's:' || g, 'metrics', '{"messages": 1}'::jsonb))
      from generate_series(1, 3000) g) counted`.execute(app.deps.database.db);
    const sketch = new Uint8Array(SKETCH_REGISTERS);
    for (const row of await visitorSketches(app.deps.database.db, { ownerId: c.ownerId, from: today, to: today }))
      mergeSketch(sketch, new Uint8Array(row.registers));
    expect(Math.abs(estimateDistinct(sketch) - 3_000) / 3_000).toBeLessThan(0.1);
    const res = await app.request('GET', '/api/v1/dashboard', { token: c.token });
    expect(res.status, res.text).toBe(200);
    expect(res.body.data.uniqueVisitorsEstimated).toBe(true);
    expect(Math.abs(res.body.data.totals.uniqueVisitors - 3_000) / 3_000).toBeLessThan(0.1);
    // A day's figure stays exact: it is counted as visitors come.
    expect(res.body.data.series.at(-1)).toMatchObject({ messages: 3_000, uniqueVisitors: 3_000 });
    const weekly = await app.request('GET', '/api/v1/dashboard?groupBy=week', { token: c.token });
    expect(Math.abs(weekly.body.data.series.at(-1).uniqueVisitors - 3_000) / 3_000).toBeLessThan(0.1);
  });
});

describe('owner-wide figures', () => {
  it('webhook attempts and failed documents are counted for monitoring; the dashboard shows documents by status', async () => {
    const c = await app.signUp('dash-ops');
    await app.deps.database.db.updateTable('owners').set({ plan: 'enterprise' }).where('id', '=', c.ownerId).execute();
    for (const path of ['/hook-ok', '/hook-fail']) {
      const hook = await app.request('POST', '/api/v1/enterprise/webhooks', {
        token: c.token,
        body: { url: `http://127.0.0.1:${port}${path}`, events: ['webhook.test'] },
      });
      expect(hook.status, hook.text).toBe(201);
      const sent = await app.request('POST', `/api/v1/enterprise/webhooks/${hook.body.data.webhook.id}/test`, { token: c.token, body: {} });
      expect(sent.status, sent.text).toBe(200);
    }
    const kb = await app.request('POST', '/api/v1/knowledge-base/configs', { token: c.token, body: { name: 'Broken' } });
    const up = await app.upload('/api/v1/knowledge-base/documents', {
      token: c.token,
      fileName: 'broken.pdf',
      bytes: Buffer.from('%PDF-1.7\nthis is not a PDF body at all'),
      fields: { configId: kb.body.data.config.id },
    });
    expect(up.status, up.text).toBe(201);
    let m: any;
    for (let i = 0; ; i++) {
      m = (await app.request('GET', '/api/v1/monitoring', { token: c.token })).body.data;
      if (m.webhooks.delivered + m.webhooks.failed >= 2 && m.documents.failed === 1) break;
      if (i > 300) throw new Error(`figures never arrived: ${JSON.stringify(m)}`);
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(m.webhooks).toEqual({ delivered: 1, failed: 1, successRate: 0.5 });
    expect(m.documents).toEqual({ failed: 1 });
    expect(m.interfaces).toEqual([]);
    const d = await app.request('GET', '/api/v1/dashboard', { token: c.token });
    expect(d.body.data.documents).toEqual({ processing: 0, completed: 0, failed: 1, total: 1 });
    // A's figures did not move.
    expect((await app.request('GET', '/api/v1/monitoring', { token: a.token })).body.data.webhooks).toEqual({ delivered: 0, failed: 0, successRate: null });
  });
});

describe('rate-limit refusals', () => {
  it('429s of an interface’s key show in its monitoring, from the security counts of every instance', async () => {
    // A second instance on the same database with a chat budget of 2 per window; with Redis, counted under a prefix
    // of its own, since the chats of the tests above are already counted under the shared one.
    const peer = await app.startPeer({ RATE_LIMIT_CHAT: '2', RATE_LIMIT_KEY_PREFIX: `dashboard-peer-${Date.now()}:` });
    try {
      const statuses: number[] = [];
      for (let i = 0; i < 4; i++) {
        statuses.push(
          (await peer.request('POST', `/api/v1/chat/${kbIface.slug}`, { token: kbIface.key, body: { message: 'When are returns accepted?' } })).status,
        );
      }
      expect(statuses).toEqual([200, 200, 429, 429]);
      await peer.deps.securityEvents.flush();
    } finally {
      await peer.stop();
    }
    const m = (await app.request('GET', '/api/v1/monitoring', { token: a.token })).body.data;
    const help = m.interfaces.find((i: { chatInterfaceId: string }) => i.chatInterfaceId === kbIface.id);
    expect(help.rateLimited).toBe(2);
    expect(m.interfaces.find((i: { chatInterfaceId: string }) => i.chatInterfaceId === endpointIface.id).rateLimited).toBe(0);
    const other = (await app.request('GET', '/api/v1/monitoring', { token: b.token })).body.data;
    expect(other.interfaces[0].rateLimited).toBe(0);
  });
});

describe('unanswered questions cut at 200 characters', () => {
  // The question is kept in the day's rollups (jsonb) cut at 200 characters: cut inside an emoji, the half left
  // made the database refuse the turn, and the visitor got a 500 for a message the input check had accepted.
  it('a question whose cut splits an emoji is answered and counted, in chat and in a knowledge-base query', async () => {
    const question = `${'q'.repeat(199)}\u{1F600} zebra?`;
    const before = (await app.request('GET', '/api/v1/dashboard', { token: a.token })).body.data.totals.unanswered;
    const answered = await chat(kbIface, question);
    expect(answered.status, answered.text).toBe(200);
    const query = await app.request('POST', '/api/v1/knowledge-base/query', { token: a.token, body: { configId, query: question } });
    expect(query.status, query.text).toBe(200);
    const after = (await app.request('GET', '/api/v1/dashboard', { token: a.token })).body.data.totals.unanswered;
    expect(after).toBe(before + 2);
  });
});
