import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/test-app.ts';

// Knowledge-base behaviours found in review: each test failed (or hung) before its fix.
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
    OUTBOUND_ALLOW_HOSTS: `127.0.0.1:${collectorPort}`,
    PARSER_SERVICE_URL: 'https://parser.example.invalid/health',
    PARSER_SERVICE_KEY: 'OPERATOR-SECRET-123',
    RATE_LIMIT_UPLOAD: '100',
  });
});
afterAll(async () => {
  await app?.stop();
  collector?.close();
});

describe('knowledge-base lifecycle', () => {
  it("test-parser never sends the operator's parser key to an owner-supplied URL", async () => {
    const owner = await app.signUp('leak');
    const res = await app.request('POST', '/api/v1/knowledge-base/test-parser', {
      token: owner.token,
      body: { serviceUrl: `http://127.0.0.1:${collectorPort}/steal` },
    });
    expect(res.status).toBe(200);
    expect(collected.length).toBe(1);
    expect(JSON.stringify(collected[0])).not.toContain('OPERATOR-SECRET');
  });

  it('queries keep working while a knowledge base re-embeds with a model of other dimensions', async () => {
    const owner = await app.signUp('reembed');
    const kb = (await app.request('POST', '/api/v1/knowledge-base/configs', { token: owner.token, body: { name: 'r' } })).body.data.config.id;
    for (let i = 0; i < 20; i++) {
      await app.upload('/api/v1/knowledge-base/documents', {
        token: owner.token,
        fileName: `d${i}.txt`,
        bytes: Buffer.from(`Document ${i} talks about topic number ${i} and glaciers ${'ice '.repeat(i)}`),
        fields: { configId: kb },
      });
    }
    for (;;) {
      const docs = await app.request('GET', `/api/v1/knowledge-base/documents?configId=${kb}`, { token: owner.token });
      if (docs.body.data.documents.every((d: { status: string }) => d.status === 'completed')) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    const patch = await app.request('PATCH', `/api/v1/knowledge-base/configs/${kb}`, {
      token: owner.token,
      body: { embedding: { provider: 'local', dimensions: 256 } },
    });
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
    await app.deps.database.db
      .updateTable('kb_documents')
      .set({ status: 'failed', stage: 'failed', error: 'provider was down' })
      .where('id', '=', id)
      .execute();
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

  it('book_slot settings are validated', async () => {
    const owner = await app.signUp('scheme');
    const kb = (await app.request('POST', '/api/v1/knowledge-base/configs', { token: owner.token, body: {} })).body.data.config.id;
    const bad = await app.request('PATCH', `/api/v1/knowledge-base/configs/${kb}/tools`, {
      token: owner.token,
      body: { tools: [{ name: 'book_slot', enabled: true, config: { daysAhead: 400 } }] },
    });
    expect(bad.status).toBe(400);
    expect(bad.body.error.details).toContain('daysAhead');
  });
});
