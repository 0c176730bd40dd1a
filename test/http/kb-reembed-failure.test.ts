import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/test-app.ts';
import { until } from '../helpers/eventually.ts';
import { startMockOpenAi, type MockOpenAi } from '../helpers/openai-mock-server.ts';
import { startWebhookReceiver, type WebhookReceiver } from '../helpers/webhook-receiver.ts';

/**
 * An embedding provider that fails (HTTP 500) for as long as a re-embedding's retries last, then recovers: the
 * switch fails visibly instead of staying re-embedding for ever, the old model keeps serving, and saving the same
 * settings again finishes the switch.
 */

let app: TestApp;
let provider: MockOpenAi;
let receiver: WebhookReceiver;
let owner: { token: string; ownerId: string };

const corpus: Record<string, string> = {
  'bees.txt': 'Honey bees communicate the location of flowers with a waggle dance. A colony has one queen.',
  'volcano.md': '# Volcanoes\n\nA volcano erupts when magma pressure exceeds the strength of the crust. Lava cools into basalt.',
  'tides.txt': 'Ocean tides are caused by the gravitational pull of the moon and the sun on the oceans.',
};

const getConfig = async (id: string) => {
  const res = await app.request('GET', `/api/v1/knowledge-base/configs/${id}`, { token: owner.token });
  expect(res.status, res.text).toBe(200);
  return res.body.data.config;
};

async function createKb(name: string, files: string[]) {
  const created = await app.request('POST', '/api/v1/knowledge-base/configs', { token: owner.token, body: { name } });
  expect(created.status, created.text).toBe(201);
  const id = created.body.data.config.id as string;
  for (const fileName of files) {
    const up = await app.upload('/api/v1/knowledge-base/documents', {
      token: owner.token,
      fileName,
      bytes: Buffer.from(corpus[fileName]!),
      fields: { configId: id },
    });
    expect(up.status, up.text).toBe(201);
  }
  await until(async () => {
    const docs = (await app.request('GET', `/api/v1/knowledge-base/documents?configId=${id}`, { token: owner.token })).body.data.documents;
    return docs.every((d: { status: string }) => d.status === 'completed') ? true : undefined;
  }, 'documents completed');
  return id;
}

const reembedJobs = (configId: string) =>
  app.deps.database.db
    .selectFrom('jobs')
    .select(['status', 'attempts', 'last_error'])
    .where('kind', '=', 'kb.reembed')
    .where(sql<string>`payload->>'configId'`, '=', configId)
    .orderBy('created_at')
    .execute();

/**
 * The queue's backoff (2, 4, 8, 16 s) is not configurable; the test brings each retry forward in SQL, as an
 * operator could, so five attempts take a second instead of half a minute. Everything else runs as in production.
 */
async function bringRetriesForward(configId: string) {
  await app.deps.database.db
    .updateTable('jobs')
    .set({ run_at: sql`now()` })
    .where('kind', '=', 'kb.reembed')
    .where('status', '=', 'queued')
    .where(sql<string>`payload->>'configId'`, '=', configId)
    .execute();
  app.deps.jobs.notify();
}

const updates = () => receiver.received.map((r) => JSON.parse(r.body) as { type: string; data: any }).filter((p) => p.type === 'knowledge_base.updated');

beforeAll(async () => {
  provider = await startMockOpenAi();
  receiver = await startWebhookReceiver();
  app = await startTestApp({
    OUTBOUND_ALLOW_HOSTS: `127.0.0.1:${provider.port},${receiver.hostPort}`,
    RATE_LIMIT_UPLOAD: '1000',
    RATE_LIMIT_DEFAULT: '100000',
  });
  owner = await app.signUp('reembed-failure');
  await app.setOwner(owner.ownerId, { plan: 'enterprise' });
  const hook = await app.request('POST', '/api/v1/enterprise/webhooks', {
    token: owner.token,
    body: { url: receiver.url, events: ['knowledge_base.updated'] },
  });
  expect(hook.status, hook.text).toBe(201);
});
afterAll(async () => {
  await app?.stop();
  await provider?.close();
  await receiver?.close();
});

describe('a re-embedding whose provider fails until the job dies', () => {
  it('fails visibly with the reason, keeps serving the old model, and is retried by saving the same settings', async () => {
    const id = await createKb('Switching models', Object.keys(corpus));

    provider.setReply((_body, path) => (path.endsWith('/embeddings') ? { status: 500 } : {}));
    const target = { provider: 'openai', baseUrl: provider.url, model: 'embed-b', dimensions: 16 };
    const patch = await app.request('PATCH', `/api/v1/knowledge-base/configs/${id}`, {
      token: owner.token,
      body: { embedding: { ...target, apiKey: 'sk-embed-b' } },
    });
    expect(patch.status, patch.text).toBe(200);
    expect(patch.body.data.config.embeddingStatus).toMatchObject({ servingVersion: 1, targetVersion: 2, reembedding: true });
    expect(patch.body.data.config.embedding).toMatchObject({ model: 'embed-b', error: null });

    const failed = await until(async () => {
      await bringRetriesForward(id);
      const config = await getConfig(id);
      return config.embedding.error === null ? undefined : config;
    }, 'the switch failed');
    expect(failed.embedding.error).toMatch(/^Re-embedding stopped after 5 attempts: the embedding provider answered HTTP 500/);
    expect(failed.embeddingStatus).toEqual({ servingVersion: 1, targetVersion: 2, reembedding: false });
    expect(failed).toMatchObject({ servingEmbeddingModel: 'local-hash-v1', embedding: { model: 'embed-b', hasApiKey: true } });
    // The handler records the failure, then the queue marks its job dead.
    const [dead] = await until(async () => {
      const jobs = await reembedJobs(id);
      return jobs[0]?.status === 'dead' ? jobs : undefined;
    }, 'the job dead');
    expect(dead).toMatchObject({ attempts: 5, last_error: expect.stringContaining('HTTP 500') });
    expect(await reembedJobs(id)).toHaveLength(1);
    const attempts = provider.requests.filter((r) => r.path.endsWith('/embeddings') && r.body.model === 'embed-b').length;
    expect(attempts).toBe(5);
    // The old model still answers.
    const during = await app.request('POST', '/api/v1/knowledge-base/query', { token: owner.token, body: { query: 'tides moon', configId: id } });
    expect(during.status, during.text).toBe(200);
    expect(during.body.data.sources[0].metadata.fileName).toBe('tides.txt');
    const graph = await app.request('POST', '/graphql', { token: owner.token, body: { query: '{ knowledgeBases { id reembedding } }' } });
    expect(graph.body.data.knowledgeBases.find((kb: { id: string }) => kb.id === id)).toEqual({ id, reembedding: false });
    const collections = await app.request('GET', '/api/v1/knowledge-base/collections', { token: owner.token });
    expect(collections.body.data.collections.find((c: { configId: string }) => c.configId === id)).toMatchObject({ servingVersion: 1, reembedding: false });
    // Subscribers learn of the failure as of any other change to the configuration.
    await until(async () => updates().find((u) => u.data.id === id && u.data.embedding.error !== null), 'knowledge_base.updated for the failure');

    // The provider is back; the owner saves the same settings (no key: the stored one stays, same host).
    provider.setReply(() => ({}));
    const retry = await app.request('PATCH', `/api/v1/knowledge-base/configs/${id}`, { token: owner.token, body: { embedding: target } });
    expect(retry.status, retry.text).toBe(200);
    expect(retry.body.data.config.embeddingStatus).toEqual({ servingVersion: 1, targetVersion: 2, reembedding: true });
    expect(retry.body.data.config.embedding).toMatchObject({ error: null, hasApiKey: true });

    const switched = await until(async () => {
      const config = await getConfig(id);
      return config.embeddingStatus.reembedding ? undefined : config;
    }, 'the retried switch finished');
    expect(switched).toMatchObject({
      servingEmbeddingModel: 'embed-b',
      embedding: { model: 'embed-b', error: null },
      embeddingStatus: { servingVersion: 2, targetVersion: 2, reembedding: false },
    });
    expect((await reembedJobs(id)).map((j) => j.status)).toEqual(['dead', 'done']);
    const versions = await app.deps.database.db.selectFrom('kb_vectors').select('version').where('config_id', '=', id).groupBy('version').execute();
    expect(versions.map((v) => v.version)).toEqual([2]);

    // The new model serves, with the key saved for it.
    const before = provider.requests.length;
    const after = await app.request('POST', '/api/v1/knowledge-base/query', { token: owner.token, body: { query: 'tides moon', configId: id } });
    expect(after.status, after.text).toBe(200);
    expect(after.body.data.sources[0].metadata.fileName).toBe('tides.txt');
    const queryEmbedding = provider.requests.slice(before).find((r) => r.path.endsWith('/embeddings'));
    expect(queryEmbedding?.body.model).toBe('embed-b');
    expect(queryEmbedding?.headers.authorization).toBe('Bearer sk-embed-b');
    await until(async () => updates().find((u) => u.data.id === id && u.data.embeddingStatus.servingVersion === 2), 'knowledge_base.updated for the switch');

    // Saving the served settings again changes nothing and queues nothing.
    const again = await app.request('PATCH', `/api/v1/knowledge-base/configs/${id}`, { token: owner.token, body: { embedding: target } });
    expect(again.body.data.config.embeddingStatus).toEqual({ servingVersion: 2, targetVersion: 2, reembedding: false });
    expect(await reembedJobs(id)).toHaveLength(2);
  }, 90_000);

  it('a switch in progress keeps its one job when the same settings are saved again', async () => {
    const id = await createKb('Slow provider', ['bees.txt']);

    provider.setReply((_body, path) => (path.endsWith('/embeddings') ? { delayMs: 1_000 } : {}));
    const target = { provider: 'openai', baseUrl: provider.url, model: 'embed-c', dimensions: 16 };
    expect((await app.request('PATCH', `/api/v1/knowledge-base/configs/${id}`, { token: owner.token, body: { embedding: target } })).status).toBe(200);
    const again = await app.request('PATCH', `/api/v1/knowledge-base/configs/${id}`, { token: owner.token, body: { embedding: target } });
    expect(again.body.data.config.embeddingStatus).toEqual({ servingVersion: 1, targetVersion: 2, reembedding: true });
    expect(await reembedJobs(id)).toHaveLength(1);
    await until(async () => ((await getConfig(id)).embeddingStatus.reembedding ? undefined : true), 'switch finished');
    provider.setReply(() => ({}));
    expect((await reembedJobs(id)).map((j) => j.status)).toEqual(['done']);
    expect((await getConfig(id)).servingEmbeddingModel).toBe('embed-c');
  });
});
