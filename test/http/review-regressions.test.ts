import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/test-app.ts';
import { buildExtractiveAnswer } from '../../routers/knowledge-base/extractive-answer.ts';
import { streamEndpoint } from '../../adapters/ai/connector/connector.ts';
import { createGuardedHttpClient } from '../../adapters/http/guarded-client.ts';

// Regressions for defects found in review: each test failed (or hung) before its fix.
let app: TestApp;
let collector: Server;
let collectorPort: number;
const collected: Array<Record<string, unknown>> = [];

beforeAll(async () => {
  collector = createServer((req, res) => {
    collected.push({ ...req.headers });
    res.writeHead(200).end('{}');
  });
  await new Promise<void>((r) => collector.listen(0, '127.0.0.1', r));
  collectorPort = (collector.address() as AddressInfo).port;
  app = await startTestApp({
    OUTBOUND_ALLOW_HOSTS: `127.0.0.1:${collectorPort},localhost:${collectorPort}`,
    PARSER_SERVICE_URL: 'https://parser.example.invalid/health',
    PARSER_SERVICE_KEY: 'OPERATOR-SECRET-123',
    TRUST_PROXY: '1',
    RATE_LIMIT_UPLOAD: '100',
  });
});
afterAll(async () => {
  await app?.stop();
  collector?.close();
});

describe('review regressions', () => {
  it('test-parser never sends the operator\'s parser key to an owner-supplied URL', async () => {
    const owner = await app.signUp('leak');
    const res = await app.request('POST', '/api/v1/knowledge-base/test-parser', { token: owner.token, body: { serviceUrl: `http://127.0.0.1:${collectorPort}/steal` } });
    expect(res.status).toBe(200);
    expect(collected.length).toBe(1);
    expect(JSON.stringify(collected[0])).not.toContain('OPERATOR-SECRET');
  });

  it('the extractive answer stays linear on long runs without spaces', () => {
    const text = 'x'.repeat(6000) + ' ' + Array.from({ length: 800 }, (_, i) => `w${i}.`).join(' ');
    const passages = Array.from({ length: 10 }, (_, i) => ({ chunkId: `c${i}`, text, fileName: 'a.txt', page: null, score: 1 }));
    const started = process.hrtime.bigint();
    const result = buildExtractiveAnswer('w5 w6', passages);
    expect(result.found).toBe(true);
    // Generous bound: the quadratic version took minutes on this input.
    expect(Number(process.hrtime.bigint() - started) / 1e9).toBeLessThan(20);
  });

  it('a flow stream of thousands of lines that never close a JSON value is framed in linear time', async () => {
    const upstream = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/x-ndjson' });
      res.end('[\n' + '1,\n'.repeat(200_000));
    });
    await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
    const port = (upstream.address() as AddressInfo).port;
    try {
      const http = createGuardedHttpClient({ allowHosts: [`127.0.0.1:${port}`] });
      const events = streamEndpoint(http, { endpointUrl: `http://127.0.0.1:${port}/api/v1/run/flow`, type: 'flow', message: 'hi', sessionId: 's', timeoutMs: 20_000 });
      await expect(async () => {
        for await (const _ of events) void _;
      }).rejects.toMatchObject({ kind: 'invalid_response' });
    } finally {
      upstream.close();
    }
  });

  it('with TRUST_PROXY, the client IP is the rightmost X-Forwarded-For entry (a spoofed left part does not reset limits)', async () => {
    const limited = await startTestApp({ TRUST_PROXY: '1', RATE_LIMIT_DEFAULT: '3' });
    try {
      const statuses: number[] = [];
      for (let i = 0; i < 5; i++) {
        const res = await limited.request('GET', '/api/v1/health/hosting', { headers: { 'x-forwarded-for': `10.9.8.${i}, 198.51.100.7` } });
        statuses.push(res.status);
      }
      expect(statuses).toEqual([200, 200, 200, 429, 429]);
    } finally {
      await limited.stop();
    }
  });

  it('changing the endpoint host without a new key drops the stored key', async () => {
    const owner = await app.signUp('host');
    const ci = await app.request('POST', '/api/v1/chat-interfaces', { token: owner.token, body: { name: 'x', endpointUrl: `http://127.0.0.1:${collectorPort}/a`, apiKey: 'upstream-secret' } });
    const id = ci.body.data.chatInterface.id;
    const samePlace = await app.request('PATCH', `/api/v1/chat-interfaces/${id}`, { token: owner.token, body: { endpointUrl: `http://127.0.0.1:${collectorPort}/b` } });
    expect(samePlace.body.data.chatInterface.hasApiKey).toBe(true);
    const elsewhere = await app.request('PATCH', `/api/v1/chat-interfaces/${id}`, { token: owner.token, body: { endpointUrl: `http://localhost:${collectorPort}/bot` } });
    expect(elsewhere.status, elsewhere.text).toBe(200);
    expect(elsewhere.body.data.chatInterface.hasApiKey).toBe(false);
  });

  it('queries keep working while a knowledge base re-embeds with a model of other dimensions', async () => {
    const owner = await app.signUp('reembed');
    const kb = (await app.request('POST', '/api/v1/knowledge-base/configs', { token: owner.token, body: { name: 'r' } })).body.data.config.id;
    for (let i = 0; i < 20; i++) {
      await app.upload('/api/v1/knowledge-base/documents', { token: owner.token, fileName: `d${i}.txt`, bytes: Buffer.from(`Document ${i} talks about topic number ${i} and glaciers ${'ice '.repeat(i)}`), fields: { configId: kb } });
    }
    for (;;) {
      const docs = await app.request('GET', `/api/v1/knowledge-base/documents?configId=${kb}`, { token: owner.token });
      if (docs.body.data.documents.every((d: { status: string }) => d.status === 'completed')) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    const patch = await app.request('PATCH', `/api/v1/knowledge-base/configs/${kb}`, { token: owner.token, body: { embedding: { provider: 'local', dimensions: 256 } } });
    expect(patch.body.data.config).toMatchObject({ servingEmbeddingModel: 'local-hash-v1', embeddingStatus: { targetVersion: 2 } });
    const statuses = new Set<number>();
    for (;;) {
      const q = await app.request('POST', '/api/v1/knowledge-base/query', { token: owner.token, body: { query: 'glaciers topic 7', configId: kb } });
      statuses.add(q.status);
      expect(q.body.data?.sources?.length ?? 0, q.text).toBeGreaterThan(0);
      const cfg = await app.request('GET', `/api/v1/knowledge-base/configs/${kb}`, { token: owner.token });
      if (!cfg.body.data.config.embeddingStatus.reembedding) break;
    }
    expect([...statuses]).toEqual([200]);
    const collections = await app.request('GET', '/api/v1/knowledge-base/collections', { token: owner.token });
    expect(collections.body.data.collections[0]).toMatchObject({ dimensions: 256, servingVersion: 2 });
  });

  it('uploading a failed document again retries it', async () => {
    const owner = await app.signUp('retry');
    const kb = (await app.request('POST', '/api/v1/knowledge-base/configs', { token: owner.token, body: {} })).body.data.config.id;
    const bytes = Buffer.from('retry me please');
    const first = await app.upload('/api/v1/knowledge-base/documents', { token: owner.token, fileName: 'r.txt', bytes, fields: { configId: kb } });
    const id = first.body.data.document.id;
    for (;;) {
      const docs = await app.request('GET', `/api/v1/knowledge-base/documents?configId=${kb}`, { token: owner.token });
      if (docs.body.data.documents[0].status !== 'processing') break;
      await new Promise((r) => setTimeout(r, 50));
    }
    await app.deps.database.db.updateTable('kb_documents').set({ status: 'failed', stage: 'failed', error: 'provider was down' }).where('id', '=', id).execute();
    const again = await app.upload('/api/v1/knowledge-base/documents', { token: owner.token, fileName: 'r.txt', bytes, fields: { configId: kb } });
    expect(again.status).toBe(200);
    expect(again.body.data).toMatchObject({ duplicate: true, document: { id, status: 'processing', error: null } });
    for (;;) {
      const docs = await app.request('GET', `/api/v1/knowledge-base/documents?configId=${kb}`, { token: owner.token });
      if (docs.body.data.documents[0].status !== 'processing') {
        expect(docs.body.data.documents[0].status).toBe('completed');
        break;
      }
      await new Promise((r) => setTimeout(r, 50));
    }
  });

  it('every call of a tRPC batch and every GraphQL alias counts against the rate limit; bodies and batches are capped', async () => {
    const limited = await startTestApp({ RATE_LIMIT_DEFAULT: '3', JSON_BODY_LIMIT_BYTES: '4096' });
    try {
      const owner = await limited.signUp('batch');
      const paths = Array.from({ length: 5 }, () => 'auth.me').join(',');
      const batch = await limited.request('GET', `/trpc/${paths}?batch=1&input=${encodeURIComponent(JSON.stringify({}))}`, { token: owner.token });
      const results = batch.body as Array<{ error?: { data?: { code?: string } } }>;
      expect(results.filter((r) => r.error?.data?.code === 'TOO_MANY_REQUESTS')).toHaveLength(2);
      const huge = Array.from({ length: 25 }, () => 'translations.get').join(',');
      expect((await limited.request('GET', `/trpc/${huge}?batch=1`)).status).toBe(400);
      const aliases = Array.from({ length: 5 }, (_, i) => `a${i}: apiKeys { id }`).join(' ');
      const gql = await limited.request('POST', '/graphql', { token: owner.token, body: { query: `{ ${aliases} }` } });
      expect(gql.body.errors.filter((e: { extensions: { code: string } }) => e.extensions.code === 'RATE_LIMITED').length).toBeGreaterThanOrEqual(2);
      const big = await limited.request('POST', '/trpc/auth.signIn', { body: { email: 'x@example.com', password: 'y'.repeat(10_000) } });
      expect(big.status).toBe(413);
      const bigGql = await limited.request('POST', '/graphql', { body: { query: `{ me { id } } # ${'y'.repeat(10_000)}` } });
      expect(bigGql.status).toBe(413);
    } finally {
      await limited.stop();
    }
  });

  it('book_slot time zones are validated', async () => {
    const owner = await app.signUp('scheme');
    const kb = (await app.request('POST', '/api/v1/knowledge-base/configs', { token: owner.token, body: {} })).body.data.config.id;
    const bad = await app.request('PATCH', `/api/v1/knowledge-base/configs/${kb}/tools`, { token: owner.token, body: { tools: [{ name: 'book_slot', enabled: true, config: { timezone: 'Foo/Bar' } }] } });
    expect(bad.status).toBe(400);
    expect(bad.body.error.details).toContain('timezone');
  });
});
