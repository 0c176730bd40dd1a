import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp, type TestResponse } from '../helpers/test-app.ts';
import { startMockOpenAi, type MockOpenAi } from '../helpers/openai-mock-server.ts';

let app: TestApp;
let mock: MockOpenAi;
let owner: { token: string };

const corpus: Record<string, string> = {
  'bees.txt': 'Honey bees communicate the location of flowers with a waggle dance. A colony has one queen.',
  'volcano.md': '# Volcanoes\n\nA volcano erupts when magma pressure exceeds the strength of the crust. Lava cools into basalt.',
  'tides.txt': 'Ocean tides are caused by the gravitational pull of the moon and the sun on the oceans.',
};

async function makeKb(body: Record<string, unknown>) {
  const res = await app.request('POST', '/api/v1/knowledge-base/configs', { token: owner.token, body });
  expect(res.status, res.text).toBe(201);
  const id = res.body.data.config.id as string;
  for (const [name, text] of Object.entries(corpus)) {
    const up = await app.upload('/api/v1/knowledge-base/documents', { token: owner.token, fileName: name, bytes: Buffer.from(text), fields: { configId: id } });
    expect(up.status, up.text).toBe(201);
  }
  await waitCompleted(id);
  return id;
}

async function waitCompleted(configId: string) {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const res = await app.request('GET', `/api/v1/knowledge-base/documents?configId=${configId}`, { token: owner.token });
    const docs = res.body.data.documents as Array<{ status: string; error: string | null }>;
    if (docs.every((d) => d.status === 'completed')) return;
    if (docs.some((d) => d.status === 'failed')) throw new Error(JSON.stringify(docs));
    if (Date.now() > deadline) throw new Error('timeout');
    await new Promise((r) => setTimeout(r, 100));
  }
}

const events = (res: TestResponse) =>
  res.text
    .split('\n')
    .filter((l) => l.startsWith('data: '))
    .map((l) => l.slice(6))
    .map((d) => (d === '[DONE]' ? d : JSON.parse(d)));

beforeAll(async () => {
  mock = await startMockOpenAi();
  app = await startTestApp({ OUTBOUND_ALLOW_HOSTS: `127.0.0.1:${mock.port}`, RATE_LIMIT_UPLOAD: '1000' });
  owner = await app.signUp('providers');
});
afterAll(async () => {
  await app?.stop();
  await mock?.close();
});

describe('a knowledge base with an OpenAI-compatible language model', () => {
  it('generates the answer from the retrieved context with temperature and maxTokens, and reports the provider usage', async () => {
    const id = await makeKb({
      name: 'LLM',
      temperature: '0.2',
      maxTokens: 321,
      llm: { provider: 'openai', baseUrl: mock.url, model: 'gpt-test', apiKey: 'sk-llm-secret' },
    });
    mock.setReply(() => ({ text: 'Bees dance to point at flowers [1].', usage: { prompt_tokens: 77, completion_tokens: 9 } }));
    const res = await app.request('POST', '/api/v1/knowledge-base/query', {
      token: owner.token,
      body: { query: 'How do bees tell each other where flowers are?', configId: id },
    });
    expect(res.status, res.text).toBe(200);
    expect(res.body.data.answer).toBe('Bees dance to point at flowers [1].');
    expect(res.body.data.usage).toEqual({ promptTokens: 77, completionTokens: 9, totalTokens: 86 });
    expect(res.body.data.sources[0].metadata.fileName).toBe('bees.txt');
    const sent = mock.requests.filter((r) => r.path.endsWith('/chat/completions')).at(-1)!;
    expect(sent.headers.authorization).toBe('Bearer sk-llm-secret');
    expect(sent.body).toMatchObject({ model: 'gpt-test', temperature: 0.2, max_tokens: 321 });
    expect(JSON.stringify(sent.body.messages)).toContain('waggle dance');
    const config = await app.request('GET', `/api/v1/knowledge-base/configs/${id}`, { token: owner.token });
    expect(config.text).not.toContain('sk-llm-secret');
    expect(config.body.data.config.llm).toMatchObject({ model: 'gpt-test', hasApiKey: true });

    mock.setReply(() => ({ text: 'Streaming answer about tides and the moon.', usage: { prompt_tokens: 50, completion_tokens: 8 } }));
    const stream = await app.request('POST', '/api/v1/knowledge-base/query/stream', {
      token: owner.token,
      body: { query: 'What causes tides?', configId: id },
    });
    const evs = events(stream);
    expect(evs[0].type).toBe('sources');
    const deltas = evs.filter((e) => e !== '[DONE]' && e.type === 'delta');
    expect(deltas.length).toBeGreaterThan(1);
    const complete = evs.find((e) => e !== '[DONE]' && e.type === 'complete');
    expect(complete.answer).toBe('Streaming answer about tides and the moon.');
    expect(deltas.map((d) => d.text).join('')).toBe(complete.answer);
    expect(complete.usage).toEqual({ promptTokens: 50, completionTokens: 8, totalTokens: 58 });
    expect(evs.at(-1)).toBe('[DONE]');
    expect(mock.requests.at(-1)!.body.stream).toBe(true);

    mock.setReply(() => ({ text: 'no usage here', usage: null }));
    const counted = await app.request('POST', '/api/v1/knowledge-base/query', { token: owner.token, body: { query: 'volcano magma', configId: id } });
    expect(counted.body.data.usage.completionTokens).toBeGreaterThan(0);
    expect(counted.body.data.usage.promptTokens).toBeGreaterThan(10);

    mock.setReply(() => ({ status: 401, rawBody: '{"error":"bad key"}' }));
    const rejected = await app.request('POST', '/api/v1/knowledge-base/query', { token: owner.token, body: { query: 'bees', configId: id } });
    expect(rejected.status).toBe(502);
    expect(rejected.body.error.code).toBe('UPSTREAM_ERROR');
    expect(rejected.body.error.details).toMatch(/API key/i);
    mock.setReply(() => ({}));
  });
  it('never passes on the key or a token of the base URL when the model echoes them, whole or streamed', async () => {
    const id = await makeKb({
      name: 'Echoing LLM',
      llm: { provider: 'openai', baseUrl: `${mock.url}/gateway?access_token=url-token-31337`, model: 'gpt-test', apiKey: 'sk-llm-echoed' },
    });
    mock.setReply(() => ({ text: 'I was called with sk-llm-echoed and url-token-31337 about tides.' }));
    const res = await app.request('POST', '/api/v1/knowledge-base/query', { token: owner.token, body: { query: 'What causes tides?', configId: id } });
    expect(res.status, res.text).toBe(200);
    expect(mock.requests.at(-1)!.headers['authorization']).toBe('Bearer sk-llm-echoed');
    expect(res.body.data.answer).toBe('I was called with [redacted] and [redacted] about tides.');
    const stream = await app.request('POST', '/api/v1/knowledge-base/query/stream', {
      token: owner.token,
      body: { query: 'What causes tides?', configId: id },
    });
    expect(stream.status, stream.text).toBe(200);
    expect(stream.text).not.toContain('sk-llm-echoed');
    expect(stream.text).not.toContain('url-token-31337');
    expect(events(stream).find((e) => e !== '[DONE]' && e.type === 'complete').answer).toBe('I was called with [redacted] and [redacted] about tides.');
  });
});

describe('an OpenAI-compatible embedding provider, and changing the model', () => {
  it('embeds through the provider, then re-embeds in the background while the old vectors keep serving', async () => {
    const id = await makeKb({
      name: 'Remote embeddings',
      embedding: { provider: 'openai', baseUrl: mock.url, model: 'embed-a', dimensions: 16, apiKey: 'sk-embed' },
    });
    const embedCalls = mock.requests.filter((r) => r.path.endsWith('/embeddings'));
    expect(embedCalls.length).toBeGreaterThan(0);
    expect(embedCalls[0]!.headers.authorization).toBe('Bearer sk-embed');
    expect(embedCalls[0]!.body.model).toBe('embed-a');
    let collections = await app.request('GET', '/api/v1/knowledge-base/collections', { token: owner.token });
    expect(collections.body.data.collections.find((c: { configId: string }) => c.configId === id)).toMatchObject({
      dimensions: 16,
      embeddingModel: 'embed-a',
      servingVersion: 1,
    });

    // Slow the provider so the switch is observable: queries must keep working on version 1 meanwhile.
    mock.setReply((_body, path) => (path.endsWith('/embeddings') ? { delayMs: 300 } : {}));
    const patch = await app.request('PATCH', `/api/v1/knowledge-base/configs/${id}`, {
      token: owner.token,
      body: { embedding: { provider: 'openai', baseUrl: mock.url, model: 'embed-b', dimensions: 24 } },
    });
    expect(patch.status).toBe(200);
    expect(patch.body.data.config.embeddingStatus).toEqual({ servingVersion: 1, targetVersion: 2, reembedding: true });
    expect(patch.body.data.config.embedding.hasApiKey).toBe(true);
    const during = await app.request('POST', '/api/v1/knowledge-base/query', { token: owner.token, body: { query: 'tides moon', configId: id } });
    expect(during.status).toBe(200);
    expect(during.body.data.sources.length).toBeGreaterThan(0);

    const deadline = Date.now() + 30_000;
    for (;;) {
      const cfg = await app.request('GET', `/api/v1/knowledge-base/configs/${id}`, { token: owner.token });
      if (!cfg.body.data.config.embeddingStatus.reembedding) break;
      if (Date.now() > deadline) throw new Error('re-embedding did not finish');
      await new Promise((r) => setTimeout(r, 100));
    }
    mock.setReply(() => ({}));
    collections = await app.request('GET', '/api/v1/knowledge-base/collections', { token: owner.token });
    const collection = collections.body.data.collections.find((c: { configId: string }) => c.configId === id);
    expect(collection).toMatchObject({ embeddingModel: 'embed-b', servingVersion: 2, reembedding: false });
    expect(collection.vectorCount).toBeGreaterThan(0);
    const versions = await app.deps.database.db.selectFrom('kb_vectors').select('version').where('config_id', '=', id).groupBy('version').execute();
    expect(versions.map((v) => v.version)).toEqual([2]);
    const after = await app.request('POST', '/api/v1/knowledge-base/query', { token: owner.token, body: { query: 'tides moon', configId: id } });
    expect(after.body.data.sources[0].metadata.fileName).toBe('tides.txt');
  });
});

describe('an embedding provider failing at query time', () => {
  const TRACE = 'Traceback (most recent call last): File "/srv/embedder/main.py", line 7';

  it('refuses a provider key no HTTP header can carry when it is saved, naming the field', async () => {
    for (const body of [
      { name: 'Bad llm key', llm: { provider: 'openai', baseUrl: mock.url, model: 'gpt-test', apiKey: 'sk-\u0001' } },
      { name: 'Bad embedding key', embedding: { provider: 'openai', baseUrl: mock.url, model: 'embed', apiKey: 'sk-\u20ac' } },
    ]) {
      const res = await app.request('POST', '/api/v1/knowledge-base/configs', { token: owner.token, body });
      expect(res.status, res.text).toBe(400);
      expect(res.body.error.details).toMatch(/apiKey: must hold only characters an HTTP header can carry/);
    }
  });

  it('is the clear UPSTREAM_* error for the owner (with the reason) and for a visitor (without it), never a 500', async () => {
    const id = await makeKb({
      name: 'Failing embeddings',
      embedding: { provider: 'openai', baseUrl: mock.url, model: 'embed-f', dimensions: 16, apiKey: 'sk-embed-f' },
    });
    const ci = await app.request('POST', '/api/v1/chat-interfaces', { token: owner.token, body: { name: 'Embeddings widget', configId: id } });
    expect(ci.status, ci.text).toBe(201);
    const key = await app.request('POST', '/api/v1/api-keys', { token: owner.token, body: { name: 'widget', chatInterfaceId: ci.body.data.chatInterface.id } });
    expect(key.status, key.text).toBe(201);
    const slug = ci.body.data.chatInterface.slug as string;

    const cases = [
      {
        reply: { status: 500, rawBody: TRACE },
        code: 'UPSTREAM_ERROR',
        visitorMessage: "the knowledge base's search answered with an error (HTTP 500)",
        reason: /HTTP 500: Traceback/,
      },
      {
        reply: { rawBody: `<html>${TRACE}</html>` },
        code: 'UPSTREAM_INVALID_RESPONSE',
        visitorMessage: "invalid response format: the knowledge base's search did not answer in the expected format",
        reason: /did not return JSON.*Traceback/,
      },
    ] as const;
    for (const c of cases) {
      mock.setReply((_body, path) => (path.endsWith('/embeddings') ? c.reply : {}));
      try {
        const query = await app.request('POST', '/api/v1/knowledge-base/query', { token: owner.token, body: { query: 'tides moon', configId: id } });
        expect(query.status, query.text).toBe(502);
        expect(query.body.error.code).toBe(c.code);
        expect(query.body.error.message).toBe('The embedding provider could not embed the query');
        expect(query.body.error.details).toMatch(c.reason);
        expect(query.text).not.toContain('sk-embed-f');

        // It fails before the first event: the JSON envelope.
        const stream = await app.request('POST', '/api/v1/knowledge-base/query/stream', { token: owner.token, body: { query: 'tides moon', configId: id } });
        expect(stream.status, stream.text).toBe(502);
        expect(stream.body.error.code).toBe(c.code);

        for (const accept of ['application/json', 'text/event-stream']) {
          const chat = await app.request('POST', `/api/v1/chat/${slug}`, {
            token: key.body.data.key,
            body: { message: 'What causes tides?' },
            headers: { accept },
          });
          expect(chat.status, chat.text).toBe(502);
          expect(chat.body.error).toEqual({
            code: c.code,
            message: c.visitorMessage,
            details: c.code === 'UPSTREAM_ERROR' ? 'upstream_error' : 'invalid_response',
          });
          expect(chat.text).not.toContain('Traceback');
          expect(chat.text).not.toContain(`127.0.0.1:${mock.port}`);
          const logged = app.logs
            .map((l) => JSON.parse(l) as Record<string, unknown>)
            .filter((l) => l.requestId === chat.headers['x-request-id'] && l.level === 'warn');
          expect(logged).toHaveLength(1);
          expect(logged[0]).toMatchObject({ msg: 'embedding provider failed during a visitor chat', source: 'embeddings' });
          expect(JSON.stringify(logged[0])).toContain('Traceback');
          expect(JSON.stringify(logged[0])).not.toContain('sk-embed-f');
        }
      } finally {
        mock.setReply(() => ({}));
      }
    }
  });
});
