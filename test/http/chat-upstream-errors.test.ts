import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp, type TestResponse } from '../helpers/test-app.ts';
import { sseEvents } from '../helpers/sse.ts';

/**
 * Visitors call POST /api/v1/chat/{slug} with a key that sits in a public web page: when the owner's endpoint
 * (or knowledge-base language model) fails, they get the category's clear message and code, never what the
 * upstream answered. The owner sees the excerpt in Test Connection and the log keeps it under the request id.
 */

const SECRET = 'sk-live-9f8e7d6c5b4a3210';
const TRACEBACK = `Traceback (most recent call last):\n  File "/srv/owner-bot/app.py", line 42, in answer\nKeyError: '${SECRET}'`;
const INTERNAL_HEADER = 'db-7.owner-internal.example';
/** Nothing of these may reach a visitor. */
const upstreamMarks = ['Traceback', 'owner-bot', 'app.py', 'KeyError', SECRET, INTERNAL_HEADER, 'maintenance-page', 'upstream-key-77'];

type Mode = 'trace-500' | 'non-json' | 'embedded-error';
let mode: Mode = 'trace-500';
let upstream: Server;
let port: number;
let app: TestApp;
let owner: { token: string };
const ifaces: Record<'generic' | 'openai' | 'kb', { id: string; slug: string; key: string }> = {} as never;

async function makeInterface(body: Record<string, unknown>) {
  const ci = await app.request('POST', '/api/v1/chat-interfaces', { token: owner.token, body });
  expect(ci.status, ci.text).toBe(201);
  const key = await app.request('POST', '/api/v1/api-keys', { token: owner.token, body: { name: 'widget', chatInterfaceId: ci.body.data.chatInterface.id } });
  expect(key.status, key.text).toBe(201);
  return { id: ci.body.data.chatInterface.id as string, slug: ci.body.data.chatInterface.slug as string, key: key.body.data.key as string };
}

function expectNothingOfUpstream(res: TestResponse) {
  for (const mark of upstreamMarks) expect(res.text, `visitor response contains ${mark}`).not.toContain(mark);
  expect(res.text).not.toContain(`127.0.0.1:${port}`);
  expect(res.text).not.toContain('/bot');
  expect(res.text).not.toContain('/v1/chat/completions');
}

/** The warn line the failure left, found by the request id the visitor got. */
function warnLine(requestId: string) {
  const lines = app.logs.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l.requestId === requestId && l.level === 'warn');
  expect(lines, `no warn line for ${requestId}`).toHaveLength(1);
  return lines[0]!;
}

beforeAll(async () => {
  upstream = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      if (mode === 'trace-500') return void res.writeHead(500, { 'content-type': 'text/plain', 'x-served-by': INTERNAL_HEADER }).end(TRACEBACK);
      if (mode === 'non-json')
        return void res
          .writeHead(200, { 'content-type': 'text/html', 'x-served-by': INTERNAL_HEADER })
          .end(`<html><body>maintenance-page ${TRACEBACK}</body></html>`);
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { message: TRACEBACK } }));
    });
  });
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  port = (upstream.address() as AddressInfo).port;
  app = await startTestApp({ OUTBOUND_ALLOW_HOSTS: `127.0.0.1:${port}`, OUTBOUND_TIMEOUT_MS: '5000' });
  owner = await app.signUp('upstream-errors');
  ifaces.generic = await makeInterface({ name: 'Generic', endpointUrl: `http://127.0.0.1:${port}/bot`, apiKey: 'upstream-key-77' });
  ifaces.openai = await makeInterface({ name: 'OpenAI-style', endpointUrl: `http://127.0.0.1:${port}/v1/chat/completions`, apiKey: 'upstream-key-77' });
  const kb = await app.request('POST', '/api/v1/knowledge-base/configs', {
    token: owner.token,
    body: { name: 'With a model', llm: { provider: 'openai', baseUrl: `http://127.0.0.1:${port}`, model: 'owner-model', apiKey: 'upstream-key-77' } },
  });
  expect(kb.status, kb.text).toBe(201);
  const configId = kb.body.data.config.id as string;
  const up = await app.upload('/api/v1/knowledge-base/documents', {
    token: owner.token,
    fileName: 'returns.txt',
    bytes: Buffer.from('Returns are accepted within 30 days of delivery.'),
    fields: { configId },
  });
  expect(up.status, up.text).toBe(201);
  for (let i = 0; ; i++) {
    const docs = await app.request('GET', `/api/v1/knowledge-base/documents?configId=${configId}`, { token: owner.token });
    if (docs.body.data.documents.every((d: { status: string }) => d.status === 'completed')) break;
    if (i > 200) throw new Error('document not processed');
    await new Promise((r) => setTimeout(r, 100));
  }
  ifaces.kb = await makeInterface({ name: 'KB with model', configId });
});

afterAll(async () => {
  await app?.stop();
  upstream?.close();
});

const cases = [
  { mode: 'trace-500', status: 502, code: 'UPSTREAM_ERROR', message: 'the external API answered with an error (HTTP 500)' },
  { mode: 'non-json', status: 502, code: 'UPSTREAM_INVALID_RESPONSE', message: /^invalid response format: / },
  // An error inside a 2xx body: no status worth reporting.
  { mode: 'embedded-error', status: 502, code: 'UPSTREAM_ERROR', message: 'the external API answered with an error' },
] as const;

describe('a failing external endpoint, as the visitor sees it', () => {
  for (const c of cases) {
    for (const type of ['generic', 'openai'] as const) {
      it(`${c.mode} (${type}): JSON answer has the category message and code, nothing of the upstream; the log has the excerpt`, async () => {
        mode = c.mode;
        const iface = ifaces[type];
        const res = await app.request('POST', `/api/v1/chat/${iface.slug}`, { token: iface.key, body: { message: 'hello' } });
        expect(res.status, res.text).toBe(c.status);
        expect(res.body.error.code).toBe(c.code);
        if (typeof c.message === 'string') expect(res.body.error.message).toBe(c.message);
        else expect(res.body.error.message).toMatch(c.message);
        expectNothingOfUpstream(res);
        const line = warnLine(String(res.headers['x-request-id']));
        expect(JSON.stringify(line)).toContain('Traceback');
        expect(JSON.stringify(line)).not.toContain('upstream-key-77');
      });

      it(`${c.mode} (${type}): SSE error event has the category message and code, nothing of the upstream`, async () => {
        mode = c.mode;
        const iface = ifaces[type];
        const res = await app.request('POST', `/api/v1/chat/${iface.slug}`, {
          token: iface.key,
          body: { message: 'hello' },
          headers: { accept: 'text/event-stream' },
        });
        // A failure before the first event is a JSON envelope; a later one an error event. Either way, no excerpt.
        if (res.status === 200) {
          const events = sseEvents(res);
          const error = events.find((e) => e !== '[DONE]' && e.type === 'error');
          expect(error?.error.code, res.text).toBe(c.code);
        } else {
          expect(res.status, res.text).toBe(c.status);
          expect(res.body.error.code).toBe(c.code);
        }
        expectNothingOfUpstream(res);
        expect(JSON.stringify(warnLine(String(res.headers['x-request-id'])))).toContain('Traceback');
      });
    }
  }

  it('the owner still sees the excerpt in Test Connection', async () => {
    for (const type of ['generic', 'openai'] as const) {
      mode = 'trace-500';
      const failed = await app.request('POST', `/api/v1/chat-interfaces/${ifaces[type].id}/test-connection`, { token: owner.token });
      expect(failed.status, failed.text).toBe(200);
      expect(failed.body.data).toMatchObject({ ok: false, status: 500, error: { kind: 'upstream_error' } });
      expect(failed.body.data.error.detail).toContain('Traceback');
      expect(failed.body.data.error.detail).toContain(SECRET);
      expect(failed.text).not.toContain('upstream-key-77');

      mode = 'non-json';
      const html = await app.request('POST', `/api/v1/chat-interfaces/${ifaces[type].id}/test-connection`, { token: owner.token });
      expect(html.body.data).toMatchObject({ ok: false, formatRecognized: false, error: { kind: 'invalid_response' } });
      expect(html.body.data.error.detail).toContain('maintenance-page');
    }
  });
});

// The same rule as the connector's (routers/ai-errors.ts): an upstream's failure is an UPSTREAM_* code, here too.
const modelCases = [
  { mode: 'trace-500', code: 'UPSTREAM_ERROR', message: "the knowledge base's language model answered with an error (HTTP 500)" },
  {
    mode: 'non-json',
    code: 'UPSTREAM_INVALID_RESPONSE',
    message: "invalid response format: the knowledge base's language model did not answer in the expected format",
  },
  { mode: 'embedded-error', code: 'UPSTREAM_ERROR', message: "the knowledge base's language model answered with an error" },
] as const;

describe("a knowledge base's failing language model, as the visitor sees it", () => {
  for (const { mode: failure, code, message } of modelCases) {
    it(`${failure}: 502 with the kind's fixed message in JSON and SSE; the log has the provider's reason`, async () => {
      mode = failure;
      const res = await app.request('POST', `/api/v1/chat/${ifaces.kb.slug}`, { token: ifaces.kb.key, body: { message: 'How long do returns take?' } });
      expect(res.status, res.text).toBe(502);
      expect(res.body.error).toMatchObject({ code, message });
      expectNothingOfUpstream(res);
      const line = warnLine(String(res.headers['x-request-id']));
      expect(line.msg).toBe('language model failed during a visitor chat');
      if (failure !== 'non-json') expect(String(line.upstreamMessage)).toContain('Traceback');

      const stream = await app.request('POST', `/api/v1/chat/${ifaces.kb.slug}`, {
        token: ifaces.kb.key,
        body: { message: 'How long do returns take?' },
        headers: { accept: 'text/event-stream' },
      });
      // The model fails before the first event: the JSON envelope, as for any failure before streaming starts.
      expect(stream.status, stream.text).toBe(502);
      expect(stream.body.error.code).toBe(code);
      expectNothingOfUpstream(stream);
      expect(warnLine(String(stream.headers['x-request-id'])).upstreamMessage).toMatch(/language-model provider/);
    });
  }

  it("the owner's own query keeps a short provider reason", async () => {
    mode = 'trace-500';
    const configs = await app.request('GET', '/api/v1/knowledge-base/configs', { token: owner.token });
    const configId = configs.body.data.configs[0].id as string;
    const res = await app.request('POST', '/api/v1/knowledge-base/query', { token: owner.token, body: { query: 'How long do returns take?', configId } });
    expect(res.status).toBe(502);
    expect(res.body.error.code).toBe('UPSTREAM_ERROR');
    expect(res.body.error.details).toContain('HTTP 500');
    expect(res.body.error.details).toContain('Traceback');
  });
});
