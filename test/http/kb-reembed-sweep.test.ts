import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/test-app.ts';
import { until } from '../helpers/eventually.ts';
import { startMockOpenAi, type MockOpenAi } from '../helpers/openai-mock-server.ts';

/**
 * Re-embeddings whose job is gone without the handler saying so: lost (a crash that took the row with it), or dead
 * after a final attempt the process did not survive. The sweep an instance runs at start-up (and periodically)
 * resumes the first and fails the second with the job's reason.
 */

let app: TestApp;
let provider: MockOpenAi;
let owner: { token: string; ownerId: string };

const getConfig = async (id: string) => {
  const res = await app.request('GET', `/api/v1/knowledge-base/configs/${id}`, { token: owner.token });
  expect(res.status, res.text).toBe(200);
  return res.body.data.config;
};

const reembedJobs = (configId: string) =>
  app.deps.database.db
    .selectFrom('jobs')
    .select(['id', 'status', 'attempts', 'last_error'])
    .where('kind', '=', 'kb.reembed')
    .where(sql<string>`payload->>'configId'`, '=', configId)
    .orderBy('created_at')
    .execute();

/** A knowledge base on the local model with one document, switched to `model` on the provider. */
async function switchingKb(name: string, model: string) {
  const created = await app.request('POST', '/api/v1/knowledge-base/configs', { token: owner.token, body: { name } });
  expect(created.status, created.text).toBe(201);
  const id = created.body.data.config.id as string;
  const text = 'Ocean tides are caused by the gravitational pull of the moon and the sun on the oceans.';
  const up = await app.upload('/api/v1/knowledge-base/documents', {
    token: owner.token,
    fileName: 'tides.txt',
    bytes: Buffer.from(text),
    fields: { configId: id },
  });
  expect(up.status, up.text).toBe(201);
  await until(async () => {
    const docs = (await app.request('GET', `/api/v1/knowledge-base/documents?configId=${id}`, { token: owner.token })).body.data.documents;
    return docs[0].status === 'completed' ? true : undefined;
  }, 'document completed');
  const patch = await app.request('PATCH', `/api/v1/knowledge-base/configs/${id}`, {
    token: owner.token,
    body: { embedding: { provider: 'openai', baseUrl: provider.url, model, dimensions: 16 } },
  });
  expect(patch.status, patch.text).toBe(200);
  // The provider hangs, so the job is running when the test takes it away.
  const [job] = await until(async () => {
    const jobs = await reembedJobs(id);
    return jobs[0]?.status === 'running' ? jobs : undefined;
  }, 're-embedding job running');
  return { id, jobId: job!.id };
}

/** The handler of a job taken away stops at its next heartbeat, cancelling its call to the provider. */
const providerCallCancelled = (model: string) =>
  until(async () => (provider.requests.some((r) => r.body?.model === model && r.aborted) ? true : undefined), `call for ${model} cancelled`);

beforeAll(async () => {
  provider = await startMockOpenAi();
  app = await startTestApp({
    OUTBOUND_ALLOW_HOSTS: `127.0.0.1:${provider.port}`,
    JOB_LEASE_MS: '1000',
    RATE_LIMIT_UPLOAD: '1000',
    RATE_LIMIT_DEFAULT: '100000',
  });
  owner = await app.signUp('reembed-sweep');
});
afterAll(async () => {
  await app?.stop();
  await provider?.close();
});

describe('the start-up sweep of embedding-model switches', () => {
  it('re-queues a switch whose job was lost, and fails one whose job died during its final attempt', async () => {
    provider.setReply((_body, path) => (path.endsWith('/embeddings') ? { delayMs: 60_000 } : {}));
    const lost = await switchingKb('Lost job', 'embed-lost');
    const died = await switchingKb('Died job', 'embed-died');

    await app.deps.database.db.deleteFrom('jobs').where('id', '=', lost.jobId).execute();
    // What the queue writes when the lease of a final attempt ran out (the worker crashed mid-attempt).
    const crashed = 'lease expired during the final attempt (5); the worker probably crashed';
    await app.deps.database.db
      .updateTable('jobs')
      .set({ status: 'dead', attempts: 5, last_error: crashed, locked_by: null, lease_until: null })
      .where('id', '=', died.jobId)
      .execute();
    await providerCallCancelled('embed-lost');
    await providerCallCancelled('embed-died');
    // Stuck, as before the sweep: re-embedding with no job to finish it.
    expect((await getConfig(lost.id)).embeddingStatus).toEqual({ servingVersion: 1, targetVersion: 2, reembedding: true });
    expect((await getConfig(died.id)).embeddingStatus).toEqual({ servingVersion: 1, targetVersion: 2, reembedding: true });

    // The provider is back, and an instance starts (a restart): its start-up sweep finds both.
    provider.setReply(() => ({}));
    const peer = await app.startPeer();
    try {
      const resumed = await until(async () => {
        const config = await getConfig(lost.id);
        return config.embeddingStatus.reembedding ? undefined : config;
      }, 'the lost switch resumed and finished');
      expect(resumed).toMatchObject({
        servingEmbeddingModel: 'embed-lost',
        embedding: { model: 'embed-lost', error: null },
        embeddingStatus: { servingVersion: 2, targetVersion: 2, reembedding: false },
      });
      expect((await reembedJobs(lost.id)).map((j) => j.status)).toEqual(['done']);
      const query = await peer.request('POST', '/api/v1/knowledge-base/query', { token: owner.token, body: { query: 'tides moon', configId: lost.id } });
      expect(query.status, query.text).toBe(200);
      expect(query.body.data.sources[0].metadata.fileName).toBe('tides.txt');

      const failed = await getConfig(died.id);
      expect(failed.embedding.error).toBe(`Re-embedding failed repeatedly: ${crashed}`);
      expect(failed.embeddingStatus).toEqual({ servingVersion: 1, targetVersion: 2, reembedding: false });
      expect(failed.servingEmbeddingModel).toBe('local-hash-v1');
      // Failed, not retried: only the owner's save starts it again.
      expect((await reembedJobs(died.id)).map((j) => j.status)).toEqual(['dead']);
      const retry = await app.request('PATCH', `/api/v1/knowledge-base/configs/${died.id}`, {
        token: owner.token,
        body: { embedding: { provider: 'openai', baseUrl: provider.url, model: 'embed-died', dimensions: 16 } },
      });
      expect(retry.body.data.config.embedding.error).toBeNull();
      const switched = await until(async () => {
        const config = await getConfig(died.id);
        return config.embeddingStatus.reembedding ? undefined : config;
      }, 'the failed switch, retried, finished');
      expect(switched).toMatchObject({ servingEmbeddingModel: 'embed-died', embedding: { error: null }, embeddingStatus: { servingVersion: 2 } });
    } finally {
      await peer.stop();
    }
  }, 90_000);
});
