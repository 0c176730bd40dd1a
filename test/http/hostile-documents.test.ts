import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/test-app.ts';
import { makePdf } from '../helpers/documents.ts';
import { hostilePdf } from '../helpers/hostile-pdf.ts';

// Parsing runs in one worker with a short deadline, so that hostile documents hit it quickly; ordinary documents
// stay far below it. The heap limit is generous here (the operator PDFs allocate as they run, faster on some Node
// versions, and these tests are about the deadline); the memory test runs its own service with a small heap.
const DEADLINE_MS = 5_000;
const MEMORY_MB = 512;
const SMALL_MEMORY_MB = 64;

let app: TestApp;
let a: { token: string; ownerId: string };
let b: { token: string; ownerId: string };
let configId: string;

type Doc = { id: string; fileName: string; status: string; stage: string; error: string | null; chunkCount: number };

async function documents(token = a.token): Promise<Doc[]> {
  const res = await app.request('GET', `/api/v1/knowledge-base/documents?configId=${configId}`, { token });
  expect(res.status).toBe(200);
  return res.body.data.documents;
}

async function waitFor(id: string, done: (d: Doc) => boolean, timeoutMs = 60_000): Promise<Doc> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const doc = (await documents()).find((d) => d.id === id);
    if (doc && done(doc)) return doc;
    if (Date.now() > deadline) throw new Error(`document ${id} did not get there: ${JSON.stringify(doc)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function upload(fileName: string, bytes: Buffer, contentType = 'application/octet-stream'): Promise<string> {
  const res = await app.upload('/api/v1/knowledge-base/documents', { token: a.token, fileName, bytes, contentType, fields: { configId } });
  expect(res.status, res.text).toBe(201);
  return res.body.data.document.id;
}

/** The worker has started and taken the document (it may still be starting when the stage changes). */
const workerBusy = () => vi.waitFor(() => expect(app.deps.documentPool.stats().busy).toBe(1), { timeout: 30_000, interval: 50 });

const ordinaryPdf = () => makePdf([['Geothermal heat pumps draw warmth from the ground.', `Batch ${Math.random()}`]]);

beforeAll(async () => {
  app = await startTestApp({
    RATE_LIMIT_UPLOAD: '1000',
    RATE_LIMIT_DEFAULT: '100000',
    RATE_LIMIT_KB_QUERY: '1000',
    PARSER_WORKERS: '1',
    PARSER_DEADLINE_MS: String(DEADLINE_MS),
    PARSER_MEMORY_MB: String(MEMORY_MB),
  });
  a = await app.signUp('hostile-a');
  b = await app.signUp('hostile-b');
  const res = await app.request('POST', '/api/v1/knowledge-base/configs', { token: a.token, body: { name: 'Hostile uploads' } });
  expect(res.status).toBe(201);
  configId = res.body.data.config.id;
});
afterAll(() => app?.stop());

describe('hostile documents are parsed off the request thread, within limits', () => {
  it('a tiny PDF with 60,000 graphics-state operators is stopped at the deadline while the service keeps answering', async () => {
    const pdf = hostilePdf(60_000);
    expect(pdf.length).toBeLessThan(1024);
    const id = await upload('operators.pdf', pdf, 'application/pdf');
    await waitFor(id, (d) => d.stage === 'extracting');
    await workerBusy();
    // While the worker grinds through the operators, the listener answers as usual.
    for (let i = 0; i < 10; i++) {
      const health = await app.request('GET', '/api/v1/health/hosting');
      expect(health.status).toBe(200);
    }
    expect((await documents()).find((d) => d.id === id)).toMatchObject({ status: 'processing', stage: 'extracting' });

    const failed = await waitFor(id, (d) => d.status !== 'processing');
    expect(failed).toMatchObject({ status: 'failed', stage: 'failed', chunkCount: 0 });
    expect(failed.error).toBe(`Parsing took longer than ${DEADLINE_MS / 1000} s and was stopped`);
    // Operators find the failure underneath in the log, beside the reason the owner reads.
    const logged = app.logs
      .map((line) => JSON.parse(line) as Record<string, unknown>)
      .find((l) => l.msg === 'document processing failed' && l.documentId === id);
    expect(logged).toMatchObject({ level: 'warn', reason: failed.error, detail: expect.stringMatching(/\w/) });
    // The other owner sees none of it.
    expect((await app.request('GET', `/api/v1/knowledge-base/documents?configId=${configId}`, { token: b.token })).status).toBe(404);
  });

  it('the next document is parsed normally, by a new worker', async () => {
    const started = app.deps.documentPool.stats().started;
    const id = await upload('ordinary.pdf', await ordinaryPdf(), 'application/pdf');
    const done = await waitFor(id, (d) => d.status !== 'processing');
    expect(done).toMatchObject({ status: 'completed', stage: 'searchable', error: null });
    expect(done.chunkCount).toBeGreaterThan(0);
    expect(app.deps.documentPool.stats().started).toBe(started + 1);
    const query = await app.request('POST', '/api/v1/knowledge-base/query', { token: a.token, body: { query: 'geothermal heat pumps', configId } });
    expect(query.status).toBe(200);
    expect(query.body.data.sources[0].metadata.fileName).toBe('ordinary.pdf');
  });

  it('deeply nested q ... Q operators are stopped the same way', async () => {
    const id = await upload('nested.pdf', hostilePdf(40_000, true), 'application/pdf');
    const failed = await waitFor(id, (d) => d.status !== 'processing');
    expect(failed).toMatchObject({ status: 'failed', error: `Parsing took longer than ${DEADLINE_MS / 1000} s and was stopped` });
  });

  it('a document that needs more memory than the heap limit fails with that reason; the service and the next document are fine', async () => {
    const small = await startTestApp({ RATE_LIMIT_UPLOAD: '1000', PARSER_WORKERS: '1', PARSER_MEMORY_MB: String(SMALL_MEMORY_MB) });
    try {
      const owner = await small.signUp('hostile-memory');
      const config = await small.request('POST', '/api/v1/knowledge-base/configs', { token: owner.token, body: { name: 'Memory' } });
      expect(config.status).toBe(201);
      const smallConfigId = config.body.data.config.id;
      const send = async (fileName: string, bytes: Buffer) => {
        const res = await small.upload('/api/v1/knowledge-base/documents', {
          token: owner.token,
          fileName,
          bytes,
          contentType: 'application/octet-stream',
          fields: { configId: smallConfigId },
        });
        expect(res.status, res.text).toBe(201);
        return res.body.data.document.id as string;
      };
      const settled = async (id: string) => {
        let doc: Doc | undefined;
        await vi.waitFor(
          async () => {
            const res = await small.request('GET', `/api/v1/knowledge-base/documents?configId=${smallConfigId}`, { token: owner.token });
            doc = (res.body.data.documents as Doc[]).find((d) => d.id === id);
            expect(doc?.status).not.toBe('processing');
          },
          { timeout: 60_000, interval: 100 },
        );
        return doc as Doc;
      };
      // 8.6 MB of Markdown: the text, its lines and the converted copy outgrow a 64 MB heap.
      const markdown = Buffer.from(`${'lorem ipsum dolor sit amet '.repeat(40)}\n\n`.repeat(8_000));
      const failed = await settled(await send('huge.md', markdown));
      expect(failed).toMatchObject({ status: 'failed', stage: 'failed', error: `Parsing needed more than ${SMALL_MEMORY_MB} MB of memory and was stopped` });
      expect((await small.request('GET', '/api/v1/health/hosting')).status).toBe(200);

      const next = await send('after.md', Buffer.from('# After\n\nSolar collectors heat water for the house.\n'));
      expect(await settled(next)).toMatchObject({ status: 'completed' });
    } finally {
      await small.stop();
    }
    // A second service, an 8.6 MB document and two waits of up to a minute each: the suite's 30 s is too short
    // for that on a loaded two-core machine.
  }, 150_000);

  it('the built-in parser check runs in the pool too', async () => {
    const res = await app.request('POST', '/api/v1/knowledge-base/test-parser', { token: a.token });
    expect(res.status).toBe(200);
    expect(res.body.data).toMatchObject({ mode: 'built-in', ok: true });
    expect(res.body.data.results.map((r: { kind: string }) => r.kind)).toEqual(['pdf', 'docx', 'md', 'txt']);
  });

  it('shutting down while a hostile document is parsed stops its worker', async () => {
    const id = await upload('last.pdf', hostilePdf(60_001), 'application/pdf');
    await waitFor(id, (d) => d.stage === 'extracting');
    await workerBusy();
    await app.close();
    expect(app.deps.documentPool.stats()).toMatchObject({ busy: 0, queued: 0 });
  });
});
