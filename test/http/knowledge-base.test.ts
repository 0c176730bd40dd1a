import { readdirSync, existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp, type TestResponse } from '../helpers/test-app.ts';
import { makeDocx, makeImageOnlyPdf, makePdf } from '../helpers/documents.ts';
import { INLINE_CONTENT_MAX_BYTES } from '../../routers/knowledge-base/documents-router.ts';

let app: TestApp;
let a: { token: string; ownerId: string };
let b: { token: string; ownerId: string };
let configId: string;

async function waitForDocuments(token: string, config: string, timeoutMs = 30_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const res = await app.request('GET', `/api/v1/knowledge-base/documents?configId=${config}`, { token });
    if (res.status !== 200) throw new Error(`listing documents answered ${res.status}: ${JSON.stringify(res.body)}`);
    const docs = res.body.data.documents as Array<{ status: string }>;
    if (docs.every((d) => d.status !== 'processing')) return res.body.data.documents as Array<Record<string, any>>;
    if (Date.now() > deadline) throw new Error(`documents still processing: ${JSON.stringify(docs)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** A text file just over what is kept in the database, so that it goes to the blob store. */
const largerThanInline = (sentence: string) => Buffer.from(sentence.repeat(Math.ceil((INLINE_CONTENT_MAX_BYTES + 1) / sentence.length)));

const upload = (token: string, config: string, fileName: string, bytes: Buffer, contentType = 'application/octet-stream') =>
  app.upload('/api/v1/knowledge-base/documents', { token, fileName, bytes, contentType, fields: { configId: config } });

function parseSse(res: TestResponse) {
  const lines = res.text.split('\n').filter((l) => l.startsWith('data: '));
  return lines.map((l) => l.slice(6)).map((d) => (d === '[DONE]' ? d : JSON.parse(d)));
}

beforeAll(async () => {
  // The tests poll the document list while documents process; on a loaded machine that outran the default budget
  // of 100 calls a minute (a 429 in the middle of a test). The limits themselves are tested with an app of their own.
  app = await startTestApp({ RATE_LIMIT_UPLOAD: '1000', RATE_LIMIT_DEFAULT: '10000' });
  a = await app.signUp('kb-a');
  b = await app.signUp('kb-b');
  const res = await app.request('POST', '/api/v1/knowledge-base/configs', {
    token: a.token,
    body: { name: 'Product docs', temperature: '0.3', maxTokens: 500, chunkSize: 400, chunkOverlap: 50 },
  });
  expect(res.status).toBe(201);
  configId = res.body.data.config.id;
});
afterAll(() => app?.stop());

describe('knowledge-base configurations', () => {
  it('creates with defaults and accepts temperature as a numeric string', async () => {
    const res = await app.request('GET', `/api/v1/knowledge-base/configs/${configId}`, { token: a.token });
    expect(res.body.data.config).toMatchObject({
      name: 'Product docs',
      temperature: 0.3,
      maxTokens: 500,
      chunkSize: 400,
      chunkOverlap: 50,
      retrievalDepth: 5,
      language: 'en',
      llm: null,
      embedding: { provider: 'local', model: 'local-hash-v1', dimensions: 384, hasApiKey: false },
      memory: { enabled: true, maxMessages: 10 },
      tools: [],
    });
  });

  it('validates temperature, maxTokens and chunk sizes, naming the field', async () => {
    for (const [body, field] of [
      [{ temperature: 2.5 }, 'temperature'],
      [{ temperature: 'hot' }, 'temperature'],
      [{ maxTokens: 0 }, 'maxTokens'],
      [{ chunkSize: 200, chunkOverlap: 150 }, 'chunkOverlap'],
      [{ embedding: { provider: 'openai', baseUrl: 'http://10.0.0.1/v1', model: 'x' } }, 'embedding'],
    ] as const) {
      const res = await app.request('POST', '/api/v1/knowledge-base/configs', { token: a.token, body });
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body.error.details).toContain(field);
    }
    const patch = await app.request('PATCH', `/api/v1/knowledge-base/configs/${configId}`, { token: a.token, body: { temperature: '1.5', maxTokens: '800' } });
    expect(patch.status).toBe(200);
    expect(patch.body.data.config).toMatchObject({ temperature: 1.5, maxTokens: 800 });
    expect((await app.request('PATCH', `/api/v1/knowledge-base/configs/${configId}`, { token: a.token, body: { temperature: -0.1 } })).status).toBe(400);
  });

  it('documents the range of temperature and the integer rule of maxTokens in the OpenAPI document', async () => {
    const doc = (await app.request('GET', '/api/v1/openapi.json')).body;
    for (const [path, method] of [
      ['/api/v1/knowledge-base/configs', 'post'],
      ['/api/v1/knowledge-base/configs/{id}', 'patch'],
    ] as const) {
      const properties = doc.paths[path][method].requestBody.content['application/json'].schema.properties;
      const numberBranch = (field: string) => properties[field].anyOf.find((branch: { type: string }) => branch.type !== 'string');
      expect(numberBranch('temperature'), `${method} ${path}`).toMatchObject({ type: 'number', minimum: 0, maximum: 2 });
      expect(numberBranch('maxTokens'), `${method} ${path}`).toMatchObject({ type: 'integer', minimum: 1, maximum: 32_000 });
      expect(properties.temperature.anyOf.find((branch: { type: string }) => branch.type === 'string')).toMatchObject({ pattern: expect.any(String) });
    }
  });

  it('keeps temperature to two decimals, so a value too small for the column is 0, not a database error', async () => {
    for (const [temperature, stored] of [
      [1e-320, 0],
      [5e-324, 0],
      [1e-40, 0],
      ['0.000000000000000000000000000000000000000000000000001', 0],
      [0.005, 0.01],
      [1.234, 1.23],
    ] as const) {
      const created = await app.request('POST', '/api/v1/knowledge-base/configs', { token: a.token, body: { name: 'tiny', temperature } });
      expect(created.status, String(temperature)).toBe(201);
      expect(created.body.data.config.temperature).toBe(stored);
      const id = created.body.data.config.id;
      const patched = await app.request('PATCH', `/api/v1/knowledge-base/configs/${id}`, { token: a.token, body: { temperature } });
      expect(patched.status, String(temperature)).toBe(200);
      expect((await app.request('GET', `/api/v1/knowledge-base/configs/${id}`, { token: a.token })).body.data.config.temperature).toBe(stored);
      expect((await app.request('DELETE', `/api/v1/knowledge-base/configs/${id}`, { token: a.token })).status).toBe(200);
    }
  });

  it('another owner gets a 404 whose message says the configuration was not found', async () => {
    for (const [method, path, body] of [
      ['GET', `/api/v1/knowledge-base/configs/${configId}`],
      ['PATCH', `/api/v1/knowledge-base/configs/${configId}`, { name: 'mine' }],
      ['DELETE', `/api/v1/knowledge-base/configs/${configId}`],
      ['GET', `/api/v1/knowledge-base/configs/${configId}/tools`],
      ['GET', `/api/v1/knowledge-base/configs/${configId}/memory`],
      ['GET', `/api/v1/knowledge-base/documents?configId=${configId}`],
      ['POST', '/api/v1/knowledge-base/query', { query: 'x', configId }],
    ] as const) {
      const res = await app.request(method, path, { token: b.token, body });
      expect(res.status, `${method} ${path}`).toBe(404);
      expect(res.body.error.message).toBe('Knowledge base configuration not found');
    }
    expect((await app.request('GET', '/api/v1/knowledge-base/configs', { token: b.token })).body.data.count).toBe(0);
    expect((await app.request('GET', '/api/v1/knowledge-base/configs')).status).toBe(401);
  });

  it('tools are validated against the registry; memory settings come through PATCH', async () => {
    const tools = await app.request('GET', `/api/v1/knowledge-base/configs/${configId}/tools`, { token: a.token });
    expect(tools.body.data.available.map((t: { name: string }) => t.name)).toEqual(['lead_capture', 'book_slot']);
    const bad = await app.request('PATCH', `/api/v1/knowledge-base/configs/${configId}/tools`, {
      token: a.token,
      body: { tools: [{ name: 'rm_rf', enabled: true }] },
    });
    expect(bad.status).toBe(400);
    const badConfig = await app.request('PATCH', `/api/v1/knowledge-base/configs/${configId}/tools`, {
      token: a.token,
      body: { tools: [{ name: 'book_slot', enabled: true, config: { slotsOffered: 0 } }] },
    });
    expect(badConfig.status).toBe(400);
    expect(badConfig.body.error.details).toContain('slotsOffered');
    const ok = await app.request('PATCH', `/api/v1/knowledge-base/configs/${configId}/tools`, {
      token: a.token,
      body: {
        tools: [
          { name: 'lead_capture', enabled: true },
          { name: 'book_slot', enabled: false, config: { slotsOffered: 3 } },
        ],
      },
    });
    expect(ok.status).toBe(200);
    expect(ok.body.data.tools[0]).toMatchObject({
      name: 'lead_capture',
      enabled: true,
      config: { fields: expect.arrayContaining([expect.objectContaining({ name: 'email' })]) },
    });
    expect(ok.body.data.tools[1].config).toEqual({ slotsOffered: 3, daysAhead: 14 });

    await app.request('PATCH', `/api/v1/knowledge-base/configs/${configId}`, { token: a.token, body: { memory: { maxMessages: 4 } } });
    const memory = await app.request('GET', `/api/v1/knowledge-base/configs/${configId}/memory`, { token: a.token });
    expect(memory.body.data).toEqual({ configId, memory: { enabled: true, maxMessages: 4 } });
  });
});

describe('documents: upload, processing, failures', () => {
  it('ingests all four formats to completed, with page and chunk counts', async () => {
    const pdf = await makePdf([
      ['Solar panels convert sunlight into electricity.', 'Photovoltaic cells use silicon semiconductors.'],
      ['The warranty for panels lasts twenty five years.', 'Inverters usually need replacement after ten years.'],
      ['Battery storage keeps energy for the night.'],
    ]);
    const docx = await makeDocx(
      'Pricing guide',
      ['Installation costs depend on roof size.'],
      [
        ['Plan', 'Price'],
        ['Basic', '4000 EUR'],
        ['Premium', '9000 EUR'],
      ],
    );
    const uploads = await Promise.all([
      upload(a.token, configId, 'solar.pdf', pdf, 'application/pdf'),
      upload(a.token, configId, 'pricing.docx', docx),
      upload(a.token, configId, 'faq.md', Buffer.from('# Frequently asked questions\n\n## Cleaning\n\nRinse the panels with **plain water** twice a year.\n')),
      upload(a.token, configId, 'notes.txt', Buffer.from('Heat pumps move heat from outside air into the house.\nThey are efficient in mild climates.\n')),
    ]);
    for (const res of uploads) {
      expect(res.status, res.text).toBe(201);
      expect(res.body.data.document.status).toBe('processing');
      expect(res.body.data.duplicate).toBe(false);
    }
    const docs = await waitForDocuments(a.token, configId);
    const byName = Object.fromEntries(docs.map((d) => [d.fileName, d]));
    expect(byName['solar.pdf']).toMatchObject({ status: 'completed', stage: 'searchable', kind: 'pdf', pageCount: 3, error: null });
    expect(byName['pricing.docx']).toMatchObject({ status: 'completed', kind: 'docx' });
    expect(byName['faq.md']).toMatchObject({ status: 'completed', kind: 'md' });
    expect(byName['notes.txt']).toMatchObject({ status: 'completed', kind: 'txt' });
    for (const d of docs) expect(d.chunkCount).toBeGreaterThan(0);
  });

  it('re-uploading identical content returns the existing document (200, duplicate)', async () => {
    const again = await upload(
      a.token,
      configId,
      'notes-copy.txt',
      Buffer.from('Heat pumps move heat from outside air into the house.\nThey are efficient in mild climates.\n'),
    );
    expect(again.status).toBe(200);
    expect(again.body.data).toMatchObject({ duplicate: true, document: { fileName: 'notes.txt' } });
  });

  it('the same content uploaded many times at once (uploads share statements) makes one document, one file, one job', async () => {
    const res = await app.request('POST', '/api/v1/knowledge-base/configs', { token: a.token, body: { name: 'Same content at once' } });
    const config = res.body.data.config.id as string;
    const small = Buffer.from('Grouped uploads of the same note become one document.\n');
    const large = largerThanInline('Grouped uploads of the same large note become one document and one file. ');
    const answers = await Promise.all(
      Array.from({ length: 12 }, (_, i) => (i % 2 === 0 ? upload(a.token, config, `small-${i}.txt`, small) : upload(a.token, config, `large-${i}.txt`, large))),
    );
    for (const [i, answer] of answers.entries()) expect([200, 201], `upload ${i}: ${answer.text}`).toContain(answer.status);
    for (const parity of [0, 1]) {
      const same = answers.filter((_, i) => i % 2 === parity);
      expect(same.filter((r) => r.status === 201)).toHaveLength(1);
      expect(new Set(same.map((r) => r.body.data.document.id)).size).toBe(1);
      expect(same.filter((r) => r.status === 200).every((r) => r.body.data.duplicate === true)).toBe(true);
    }
    const docs = await waitForDocuments(a.token, config);
    expect(docs.map((d) => d.status)).toEqual(['completed', 'completed']);
    const db = app.deps.database.db;
    const rows = await db.selectFrom('kb_documents').select(['id', 'blob_key']).where('config_id', '=', config).execute();
    expect(rows.filter((r) => r.blob_key)).toHaveLength(1);
    // Every duplicate's file was removed again: the one left is the document's.
    expect(readdirSync(join(app.deps.config.DATA_DIR, 'blobs', config))).toEqual([rows.find((r) => r.blob_key)!.blob_key!.split('/')[1]]);
    const jobs = await db.selectFrom('jobs').select('id').where(sql<string>`payload->>'configId'`, '=', config).execute();
    expect(jobs).toHaveLength(2);
  });

  it('refuses mislabelled, non-UTF-8 and oversized files, and fails scanned PDFs with a reason', async () => {
    const docx = await makeDocx('x', ['y'], [['a']]);
    const mislabelled = await upload(a.token, configId, 'report.pdf', docx, 'application/pdf');
    expect(mislabelled.status).toBe(415);
    expect(mislabelled.body.error.details).toMatch(/zip|word/i);
    const latin1 = await upload(a.token, configId, 'latin.txt', Buffer.from([0x63, 0x61, 0x66, 0xe9, 0x0a]));
    expect(latin1.status).toBe(415);
    expect(latin1.body.error.details).toMatch(/UTF-8/);
    // A binary the built-in table does not know (a Windows cursor) is named by file-type.
    const cursor = Buffer.from([0x00, 0x00, 0x02, 0x00, 0x01, 0x00, 0x20, 0x20, ...new Uint8Array(40).fill(0xff)]);
    const named = await upload(a.token, configId, 'pointer.txt', cursor);
    expect(named.status).toBe(415);
    expect(named.body.error.details).toBe('file: pointer.txt is a CUR file (image/x-icon), not a supported document (PDF, DOCX, Markdown or plain text)');
    const big = await upload(a.token, configId, 'big.txt', Buffer.alloc(10 * 1024 * 1024 + 10, 0x61));
    expect(big.status).toBe(413);
    expect(big.body.error.code).toBe('PAYLOAD_TOO_LARGE');
    const noFile = await app.upload('/api/v1/knowledge-base/documents', { token: a.token, fileName: 'x.txt', bytes: Buffer.from('hi'), fields: {} });
    expect(noFile.status).toBe(400);

    const scanned = await upload(a.token, configId, 'scan.pdf', await makeImageOnlyPdf(), 'application/pdf');
    expect(scanned.status).toBe(201);
    const docs = await waitForDocuments(a.token, configId);
    const failed = docs.find((d) => d.fileName === 'scan.pdf')!;
    expect(failed).toMatchObject({ status: 'failed', stage: 'failed' });
    expect(failed.error).toMatch(/no text layer/i);
    // The refused uploads stored nothing: every file in the blob store and every content row is a document's.
    const db = app.deps.database.db;
    const rows = await db.selectFrom('kb_documents').select(['id', 'blob_key']).where('config_id', '=', configId).execute();
    const folder = join(app.deps.config.DATA_DIR, 'blobs', configId);
    expect((existsSync(folder) ? readdirSync(folder) : []).sort()).toEqual(rows.flatMap((r) => (r.blob_key ? [r.blob_key.split('/')[1]] : [])).sort());
    const contents = await db
      .selectFrom('kb_document_contents')
      .select('document_id')
      .where(
        'document_id',
        'in',
        rows.map((r) => r.id),
      )
      .execute();
    expect(contents.map((c) => c.document_id).sort()).toEqual(
      rows
        .filter((r) => !r.blob_key)
        .map((r) => r.id)
        .sort(),
    );
  });

  it('keeps a small file in the database and a larger one in the blob store; both are processed, both go with their document', async () => {
    const res = await app.request('POST', '/api/v1/knowledge-base/configs', { token: a.token, body: { name: 'Where bytes live' } });
    const config = res.body.data.config.id as string;
    const small = Buffer.from('Small notes about the lighthouse keeper and his lamp.\n');
    const paragraph = 'The harbour master logs every vessel, its cargo and its crew before the tide turns. ';
    const large = Buffer.concat([Buffer.from('# Harbour log\n\n'), largerThanInline(paragraph)]);
    expect(small.length).toBeLessThanOrEqual(INLINE_CONTENT_MAX_BYTES);
    expect(large.length).toBeGreaterThan(INLINE_CONTENT_MAX_BYTES);
    const smallId = (await upload(a.token, config, 'small.txt', small)).body.data.document.id as string;
    const largeId = (await upload(a.token, config, 'large.md', large)).body.data.document.id as string;
    const docs = await waitForDocuments(a.token, config);
    expect(docs.map((d) => [d.fileName, d.status])).toEqual(
      expect.arrayContaining([
        ['small.txt', 'completed'],
        ['large.md', 'completed'],
      ]),
    );
    expect(docs.every((d) => d.chunkCount > 0)).toBe(true);

    const db = app.deps.database.db;
    const row = (id: string) => db.selectFrom('kb_documents').select('blob_key').where('id', '=', id).executeTakeFirstOrThrow();
    const content = (id: string) => db.selectFrom('kb_document_contents').select('bytes').where('document_id', '=', id).executeTakeFirst();
    expect((await row(smallId)).blob_key).toBeNull();
    expect((await content(smallId))?.bytes).toEqual(small);
    const largeKey = (await row(largeId)).blob_key!;
    expect(readFileSync(join(app.deps.config.DATA_DIR, 'blobs', largeKey))).toEqual(large);
    expect(await content(largeId)).toBeUndefined();
    const answer = await app.request('POST', '/api/v1/knowledge-base/query', { token: a.token, body: { configId: config, query: 'lighthouse keeper lamp' } });
    expect(answer.status).toBe(200);
    expect(answer.body.data.sources.map((s: { metadata: { fileName: string } }) => s.metadata.fileName)).toContain('small.txt');

    for (const id of [smallId, largeId]) expect((await app.request('DELETE', `/api/v1/knowledge-base/documents/${id}`, { token: a.token })).status).toBe(200);
    expect(await content(smallId)).toBeUndefined();
    expect(existsSync(join(app.deps.config.DATA_DIR, 'blobs', largeKey))).toBe(false);
  });

  it('uploads are owner-scoped and anonymous uploads are refused before the body is read', async () => {
    expect((await upload(b.token, configId, 'x.txt', Buffer.from('hello'))).status).toBe(404);
    expect((await app.upload('/api/v1/knowledge-base/documents', { fileName: 'x.txt', bytes: Buffer.from('hello'), fields: { configId } })).status).toBe(401);
  });

  it('listing and uploading need a configuration id of your own: 400 without one, 401 without auth, 404 for any other', async () => {
    const list = (query: string, token?: string) => app.request('GET', `/api/v1/knowledge-base/documents${query}`, { token });
    expect((await list(`?configId=${configId}`, a.token)).status).toBe(200);
    expect((await list(`?configId=${configId}`)).status).toBe(401);
    expect((await list(`?configId=${configId}`, b.token)).status).toBe(404);
    // An id that is not one of ours names nothing (404, as an unknown one); a missing or unstorable one is a 400.
    expect((await list('?configId=not-an-id', a.token)).status).toBe(404);
    for (const query of ['', `?configId=${configId}%00`]) {
      const r = await list(query, a.token);
      expect(r.status).toBe(400);
      expect(r.body.error.code).toBe('VALIDATION_FAILED');
    }
    expect((await upload(a.token, 'not-an-id', 'x.txt', Buffer.from('hello'))).status).toBe(404);
    const noConfig = await app.upload('/api/v1/knowledge-base/documents', { token: a.token, fileName: 'x.txt', bytes: Buffer.from('hello'), fields: {} });
    expect(noConfig.status).toBe(400);
  });
});

describe('query, stream, collections', () => {
  it('answers with cited sources, scores and usage (extractive without a language model)', async () => {
    const res = await app.request('POST', '/api/v1/knowledge-base/query', {
      token: a.token,
      body: { query: 'How long does the panel warranty last?', configId },
    });
    expect(res.status).toBe(200);
    const { answer, sources, usage } = res.body.data;
    expect(sources.length).toBeGreaterThan(0);
    expect(sources[0].metadata.fileName).toBe('solar.pdf');
    expect(sources[0].page).toBe(2);
    expect(sources[0].score).toBeGreaterThan(0);
    expect(sources[0].score).toBeLessThanOrEqual(1);
    expect(answer).toContain('twenty five years');
    expect(usage.totalTokens).toBe(usage.promptTokens + usage.completionTokens);
    expect(usage.completionTokens).toBeGreaterThan(0);

    const table = await app.request('POST', '/api/v1/knowledge-base/query', { token: a.token, body: { query: 'price of the premium plan', configId } });
    expect(table.body.data.sources[0].metadata.fileName).toBe('pricing.docx');
    expect(table.body.data.sources[0].text).toContain('9000 EUR');

    const nothing = await app.request('POST', '/api/v1/knowledge-base/query', {
      token: a.token,
      body: { query: 'zebra migration patterns in serengeti', configId },
    });
    expect(nothing.body.data.answer).toMatch(/could not find/i);
  });

  it('streams sources, deltas, a complete event and [DONE]; errors before the first byte are envelopes', async () => {
    const res = await app.request('POST', '/api/v1/knowledge-base/query/stream', { token: a.token, body: { query: 'How do I clean the panels?', configId } });
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toContain('text/event-stream');
    const events = parseSse(res);
    expect(events.at(-1)).toBe('[DONE]');
    expect(events[0].type).toBe('sources');
    const complete = events.find((e) => e !== '[DONE]' && e.type === 'complete');
    expect(complete.answer).toContain('plain water');
    const deltas = events
      .filter((e) => e !== '[DONE]' && e.type === 'delta')
      .map((e) => e.text)
      .join('');
    expect(deltas).toBe(complete.answer);
    expect(complete.sources[0].metadata.fileName).toBe('faq.md');

    const missing = await app.request('POST', '/api/v1/knowledge-base/query/stream', { token: b.token, body: { query: 'x', configId } });
    expect(missing.status).toBe(404);
    expect(missing.headers['content-type']).toContain('application/json');
    const invalid = await app.request('POST', '/api/v1/knowledge-base/query/stream', { token: a.token, body: { configId } });
    expect(invalid.status).toBe(400);
  });

  it('lists one collection per configuration', async () => {
    const res = await app.request('GET', '/api/v1/knowledge-base/collections', { token: a.token });
    const collection = res.body.data.collections.find((c: { configId: string }) => c.configId === configId);
    expect(collection).toMatchObject({
      dimensions: 384,
      embeddingModel: 'local-hash-v1',
      servingVersion: 1,
      reembedding: false,
      indexKind: 'exact-in-process',
    });
    expect(collection.vectorCount).toBeGreaterThan(4);
    expect((await app.request('GET', '/api/v1/knowledge-base/collections', { token: b.token })).body.data.count).toBe(0);
    for (const path of ['/api/v1/knowledge-base/collections', '/api/v1/knowledge-base/health']) {
      const anonymous = await app.request('GET', path);
      expect(anonymous.status, path).toBe(401);
      expect(anonymous.body.success).toBe(false);
    }
  });

  it('the older unversioned paths answer with the flat shape', async () => {
    const docs = await app.request('GET', `/api/knowledge-base/documents?configId=${configId}`, { token: a.token });
    expect(docs.body.success).toBe(true);
    expect(docs.body.data).toBeUndefined();
    expect(docs.body.count).toBe(docs.body.documents.length);
    const query = await app.request('POST', '/api/knowledge-base/query', { token: a.token, body: { query: 'warranty', configId } });
    expect(query.body.answer).toBeDefined();
    expect(query.body.sources.length).toBeGreaterThan(0);
    const collections = await app.request('GET', '/api/knowledge-base/collections/list', { token: a.token });
    expect(collections.body.collections.length).toBeGreaterThan(0);
    const uploaded = await app.upload('/api/knowledge-base/upload', {
      token: a.token,
      fileName: 'legacy.txt',
      bytes: Buffer.from('Legacy upload path works for wind turbines.'),
      fields: { configId },
    });
    expect(uploaded.status).toBe(201);
    expect(uploaded.body.document.fileName).toBe('legacy.txt');
  });

  it('reports health and checks the built-in parsers', async () => {
    const health = await app.request('GET', '/api/v1/knowledge-base/health', { token: a.token });
    expect(health.status).toBe(200);
    expect(health.body.data).toMatchObject({ status: 'ok', database: { status: 'up' }, parser: { status: 'ok' } });
    expect(health.body.data.vectorSearch.mode).toBe('exact');
    expect(health.body.data.queue).toMatchObject({ queued: expect.any(Number), dead: expect.any(Number) });
    // The queue counts only the caller's own jobs: another owner's, or other kinds of work, are not shown.
    const later = { runAt: new Date(Date.now() + 3_600_000) };
    const queued = async (token: string) => (await app.request('GET', '/api/v1/knowledge-base/health', { token })).body.data.queue.queued as number;
    const [beforeA, beforeB] = [await queued(a.token), await queued(b.token)];
    const otherConfig = (await app.request('POST', '/api/v1/knowledge-base/configs', { token: b.token, body: { name: 'b kb' } })).body.data.config.id;
    const jobIds = [
      await app.deps.jobs.enqueue('kb.reembed', { configId: otherConfig, version: 99 }, later),
      await app.deps.jobs.enqueue('mail.test-only-kind', { to: 'x@example.com' }, later),
      await app.deps.jobs.enqueue('kb.reembed', { configId, version: 99 }, later),
    ];
    expect(await queued(a.token)).toBe(beforeA + 1);
    expect(await queued(b.token)).toBe(beforeB + 1);
    await app.deps.jobs.cancel('configId', [otherConfig, configId]);
    await app.deps.database.db.deleteFrom('jobs').where('id', 'in', jobIds).execute();
    const parser = await app.request('POST', '/api/v1/knowledge-base/test-parser', { token: a.token });
    expect(parser.body.data).toMatchObject({ mode: 'built-in', ok: true });
    expect(parser.body.data.results.map((r: { kind: string }) => r.kind).sort()).toEqual(['docx', 'md', 'pdf', 'txt']);
  });
});

describe('deleting', () => {
  it('deletes one document, bulk-deletes counting only owned ids, and deleting a configuration removes everything', async () => {
    const res = await app.request('POST', '/api/v1/knowledge-base/configs', { token: a.token, body: { name: 'Scratch' } });
    const scratch = res.body.data.config.id as string;
    const ids: string[] = [];
    for (const text of ['alpha one', 'beta two', 'gamma three'])
      ids.push((await upload(a.token, scratch, `${text}.txt`, Buffer.from(`${text} content here`))).body.data.document.id);
    // One file large enough for the blob store, so that the configuration has a folder for its deletion to remove.
    const filed = await upload(a.token, scratch, 'filed.txt', largerThanInline('A filed record of the delta survey. '));
    expect(filed.status).toBe(201);
    expect(existsSync(join(app.deps.config.DATA_DIR, 'blobs', scratch))).toBe(true);
    await waitForDocuments(a.token, scratch);

    expect((await app.request('DELETE', `/api/v1/knowledge-base/documents/${ids[0]}`, { token: b.token })).status).toBe(404);
    expect((await app.request('DELETE', `/api/v1/knowledge-base/documents/${ids[0]}`, { token: a.token })).body.data).toEqual({ deleted: true, id: ids[0] });
    const bulkB = await app.request('POST', '/api/v1/knowledge-base/documents/bulk-delete', { token: b.token, body: { documentIds: [ids[1]] } });
    expect(bulkB.body.data.deleted).toBe(0);
    expect((await app.request('POST', '/api/v1/knowledge-base/documents/bulk-delete', { token: a.token, body: { documentIds: [] } })).status).toBe(400);
    expect(
      (
        await app.request('POST', '/api/v1/knowledge-base/documents/bulk-delete', {
          token: a.token,
          body: { documentIds: Array.from({ length: 101 }, () => ids[1]) },
        })
      ).status,
    ).toBe(400);
    const bulk = await app.request('POST', '/api/v1/knowledge-base/documents/bulk-delete', {
      token: a.token,
      body: { documentIds: [ids[1], 'not-an-id', '00000000-0000-0000-0000-000000000000'] },
    });
    expect(bulk.body.data.deleted).toBe(1);

    await upload(a.token, scratch, 'pending.txt', Buffer.from('queued but deleted soon'));
    const del = await app.request('DELETE', `/api/v1/knowledge-base/configs/${scratch}`, { token: a.token });
    expect(del.status).toBe(200);
    const db = app.deps.database.db;
    expect(await db.selectFrom('kb_documents').select('id').where('config_id', '=', scratch).execute()).toEqual([]);
    expect(await db.selectFrom('kb_chunks').select('id').where('config_id', '=', scratch).execute()).toEqual([]);
    expect(await db.selectFrom('kb_vectors').select('chunk_id').where('config_id', '=', scratch).execute()).toEqual([]);
    const jobs = await db.selectFrom('jobs').select(['id', 'payload']).where('status', 'in', ['queued', 'running']).execute();
    expect(jobs.filter((j) => JSON.stringify(j.payload).includes(scratch))).toEqual([]);
    expect(existsSync(join(app.deps.config.DATA_DIR, 'blobs', scratch))).toBe(false);
    expect((await app.request('GET', `/api/v1/knowledge-base/configs/${scratch}`, { token: a.token })).status).toBe(404);
    // This instance had seen the configuration as its caller's (uploads skip the look-up then): the insert's
    // foreign key answers the same 404, and the folder the put made again is removed.
    const late = await upload(a.token, scratch, 'late.txt', largerThanInline('Uploaded after the deletion. '));
    expect(late.status).toBe(404);
    expect(late.body.error.message).toBe('Knowledge base configuration not found');
    expect(existsSync(join(app.deps.config.DATA_DIR, 'blobs', scratch))).toBe(false);
    expect(await db.selectFrom('kb_documents').select('id').where('config_id', '=', scratch).execute()).toEqual([]);
  });
});

describe('GraphQL, vector paths, hostile files, limits', () => {
  it('GraphQL shows knowledge bases, documents with status, and collections (same procedures, same isolation)', async () => {
    const query = `{ knowledgeBases { id name embeddingModel documentCounts { completed failed processing } documents { fileName status chunkCount } } collections { configId vectorCount dimensions } }`;
    const res = await app.request('POST', '/graphql', { token: a.token, body: { query } });
    expect(res.status).toBe(200);
    const kb = res.body.data.knowledgeBases.find((k: { id: string }) => k.id === configId);
    expect(kb.embeddingModel).toBe('local-hash-v1');
    expect(kb.documentCounts.completed).toBeGreaterThanOrEqual(4);
    expect(kb.documentCounts.failed).toBeGreaterThanOrEqual(1);
    expect(kb.documents.find((d: { fileName: string }) => d.fileName === 'solar.pdf').status).toBe('completed');
    expect(res.body.data.collections.find((c: { configId: string }) => c.configId === configId).dimensions).toBe(384);
    const other = await app.request('POST', '/graphql', { token: b.token, body: { query: `{ documents(configId: "${configId}") { id } }` } });
    expect(other.body.errors[0].extensions.code).toBe('NOT_FOUND');
    expect(other.body.errors[0].message).toBe('Knowledge base configuration not found');
  });

  it('the in-memory vector index and the page-by-page scan return the nearest chunks by cosine of the stored vectors', async () => {
    const { createVectorIndexes } = await import('../../routers/knowledge-base/vector-index.ts');
    const { embedderFor } = await import('../../routers/knowledge-base/embedders.ts');
    const { findConfigById } = await import('../../routers/knowledge-base/repository.ts');
    const db = app.deps.database.db;
    const config = (await findConfigById(db, configId))!;
    const logger = { warn: () => {} };
    // No memory budget scans page by page; the default instance answers from memory once built.
    const scan = createVectorIndexes({ maxFloats: 0, logger });
    const memory = createVectorIndexes({ maxFloats: 1_000_000, logger });
    // The reference: every chunk embedded again here (the local model is deterministic) and ranked by cosine, so
    // the stored bytes are checked against what was embedded, not only the two searches against each other.
    const chunks = await db.selectFrom('kb_chunks').select(['id', 'text']).where('config_id', '=', configId).execute();
    const chunkVectors = (await embedderFor(app.deps, config).embed(chunks.map((c) => c.text))).vectors;
    for (const question of ['warranty of solar panels', 'premium plan price', 'heat pumps in mild climates']) {
      const { vectors } = await embedderFor(app.deps, config).embed([question]);
      const params = { configId, version: config.serving_version, contentVersion: config.content_version, query: vectors[0]!, limit: 8 };
      const exact = await scan.search(db, params);
      expect(exact.length).toBeGreaterThan(0);
      const fromMemory = await memory.search(db, params);
      expect(fromMemory.map((h) => h.chunkId)).toEqual(exact.map((h) => h.chunkId));
      fromMemory.forEach((h, i) => expect(h.similarity).toBeCloseTo(exact[i]!.similarity, 9));
      // A chunk whose text embeds to zero has no stored vector (vectors.ts).
      const stored = chunks.flatMap((c, i) => (chunkVectors[i]!.some((x) => x !== 0) ? [{ id: c.id, vector: chunkVectors[i]! }] : []));
      const cosine = new Map(stored.map((c) => [c.id, c.vector.reduce((sum, x, d) => sum + x * vectors[0]![d]!, 0)]));
      const best = [...cosine.values()].sort((x, y) => y - x);
      exact.forEach((h, i) => {
        expect(h.similarity).toBeCloseTo(cosine.get(h.chunkId)!, 5);
        expect(h.similarity).toBeCloseTo(best[i]!, 5);
      });
    }
  });

  it('a DOCX zip bomb fails the document; the service keeps serving', async () => {
    const { zipSync } = await import('fflate');
    const bomb = Buffer.from(
      zipSync(
        {
          '[Content_Types].xml': new TextEncoder().encode('<Types/>'),
          'word/document.xml': new TextEncoder().encode('<w:document/>'),
          'word/media/zeros.bin': new Uint8Array(200 * 1024 * 1024),
        },
        { level: 9 },
      ),
    );
    expect(bomb.length).toBeLessThan(2 * 1024 * 1024);
    // zipSync held this process (and so the in-process server) for seconds: let the overdue keep-alive timers
    // close idle sockets first, or the upload may be written to a socket the server is closing (ECONNRESET).
    await new Promise((resolve) => setTimeout(resolve, 50));
    const res = await upload(a.token, configId, 'bomb.docx', bomb);
    expect(res.status).toBe(201);
    const docs = await waitForDocuments(a.token, configId);
    const failed = docs.find((d) => d.fileName === 'bomb.docx')!;
    expect(failed.status).toBe('failed');
    expect(failed.error).toMatch(/zip bomb/i);
    expect((await app.request('GET', '/api/v1/health/hosting')).status).toBe(200);
  });

  it('uploads are limited to 10 per minute, queries to 60, with the headers', async () => {
    const limited = await startTestApp();
    try {
      const owner = await limited.signUp('limits');
      const config = (await limited.request('POST', '/api/v1/knowledge-base/configs', { token: owner.token, body: {} })).body.data.config.id;
      const statuses: number[] = [];
      for (let i = 0; i < 11; i++) {
        const res = await limited.upload('/api/v1/knowledge-base/documents', {
          token: owner.token,
          fileName: `n${i}.txt`,
          bytes: Buffer.from(`note number ${i}`),
          fields: { configId: config },
        });
        statuses.push(res.status);
        if (i === 10) {
          expect(res.headers['x-ratelimit-limit']).toBe('10');
          expect(res.headers['retry-after']).toBeDefined();
        }
      }
      expect(statuses.filter((s) => s === 201)).toHaveLength(10);
      expect(statuses[10]).toBe(429);
      const q = await limited.request('POST', '/api/v1/knowledge-base/query', { token: owner.token, body: { query: 'note', configId: config } });
      expect(q.headers['x-ratelimit-limit']).toBe('60');
    } finally {
      await limited.stop();
    }
  });
});

describe('lexical ranking', () => {
  it('the SQL BM25 gives the same scores as the in-memory reference over the same chunks', async () => {
    const { lexicalSearch } = await import('../../routers/knowledge-base/search-repository.ts');
    const { Bm25Index } = await import('../../adapters/outbound/text/bm25.ts');
    const { analyze } = await import('../../adapters/outbound/text/text-analysis.ts');
    const chunks = await app.deps.database.db.selectFrom('kb_chunks').select(['id', 'text']).where('config_id', '=', configId).execute();
    const reference = new Bm25Index({ language: 'en' });
    for (const c of chunks) reference.add(c.id, c.text);
    for (const question of ['panel warranty years', 'premium plan price EUR', 'clean panels with water', 'heat pumps']) {
      const sql = await lexicalSearch(app.deps.database.db, configId, analyze(question, 'en'), 10);
      const mem = reference.search(question, 10);
      expect(sql.map((h) => h.chunkId)).toEqual(mem.map((h) => h.id));
      sql.forEach((h, i) => expect(h.score).toBeCloseTo(mem[i]!.score, 6));
    }
  });

  it('the in-memory indexes give what the database gives, and follow changes at once (here and on another instance)', async () => {
    const { lexicalSearch } = await import('../../routers/knowledge-base/search-repository.ts');
    const { analyze } = await import('../../adapters/outbound/text/text-analysis.ts');
    const { createVectorIndexes } = await import('../../routers/knowledge-base/vector-index.ts');
    const { embedderFor } = await import('../../routers/knowledge-base/embedders.ts');
    const { findConfigById } = await import('../../routers/knowledge-base/repository.ts');
    const db = app.deps.database.db;
    const scan = createVectorIndexes({ maxFloats: 0, logger: { warn: () => {} } });
    const nearest = async (indexes: typeof app.deps.vectorIndexes, question: string) => {
      const config = (await findConfigById(db, configId))!;
      const { vectors } = await embedderFor(app.deps, config).embed([question]);
      const params = { configId, version: config.serving_version, contentVersion: config.content_version, query: vectors[0]!, limit: 5 };
      return (await indexes.search(db, params)).map((h) => h.chunkId);
    };
    const vectorQuestion = 'extended warranty when registered within 30 days';
    const configOf = async () => await db.selectFrom('kb_configs').select(['id', 'content_version']).where('id', '=', configId).executeTakeFirstOrThrow();
    const questions = ['panel warranty years', 'premium plan price EUR', 'clean panels with water', 'heat pumps', 'zzzz nothing'];
    const compare = async (indexes: typeof app.deps.lexicalIndexes) => {
      const config = await configOf();
      for (const question of questions) {
        const terms = analyze(question, 'en');
        const fromSql = await lexicalSearch(db, configId, terms, 10);
        const fromMemory = await indexes.search(db, config, terms, 10);
        expect(
          fromMemory.map((h) => h.chunkId),
          question,
        ).toEqual(fromSql.map((h) => h.chunkId));
        fromMemory.forEach((h, i) => expect(h.score).toBeCloseTo(fromSql[i]!.score, 9));
      }
    };
    // The first search starts the build and answers from SQL; once built, the index answers.
    await compare(app.deps.lexicalIndexes);
    await app.deps.lexicalIndexes.idle();
    await compare(app.deps.lexicalIndexes);

    const peer = await app.startPeer();
    try {
      await peer.deps.lexicalIndexes.search(db, await configOf(), ['warranti'], 1);
      await peer.deps.lexicalIndexes.idle();
      for (const deps of [app.deps, peer.deps]) {
        expect(await nearest(deps.vectorIndexes, vectorQuestion)).toEqual(await nearest(scan, vectorQuestion));
        await deps.vectorIndexes.idle();
      }
      // A new document on this instance: both indexes are behind the new content version and must not answer.
      const added = await app.upload('/api/v1/knowledge-base/documents', {
        token: a.token,
        fileName: 'warranty-extra.txt',
        bytes: Buffer.from('Extended warranty: panels carry a 40 years warranty when registered within 30 days.'),
        fields: { configId },
      });
      expect(added.status, added.text).toBe(201);
      await waitForDocuments(a.token, configId);
      const config = await configOf();
      const terms = analyze('panel warranty years registered', 'en');
      const fromSql = await lexicalSearch(db, configId, terms, 10);
      for (const indexes of [app.deps.lexicalIndexes, peer.deps.lexicalIndexes]) {
        expect((await indexes.search(db, config, terms, 10)).map((h) => h.chunkId)).toEqual(fromSql.map((h) => h.chunkId));
        await indexes.idle();
        expect((await indexes.search(db, config, terms, 10)).map((h) => h.chunkId)).toEqual(fromSql.map((h) => h.chunkId));
      }
      const withNew = await nearest(scan, vectorQuestion);
      for (const deps of [app.deps, peer.deps]) {
        expect(await nearest(deps.vectorIndexes, vectorQuestion)).toEqual(withNew);
        await deps.vectorIndexes.idle();
        expect(await nearest(deps.vectorIndexes, vectorQuestion)).toEqual(withNew);
      }
      const removed = await app.request('DELETE', `/api/v1/knowledge-base/documents/${added.body.data.document.id}`, { token: a.token });
      expect(removed.status, removed.text).toBe(200);
      const after = await configOf();
      const withoutIt = await lexicalSearch(db, configId, terms, 10);
      for (const indexes of [app.deps.lexicalIndexes, peer.deps.lexicalIndexes]) {
        expect((await indexes.search(db, after, terms, 10)).map((h) => h.chunkId)).toEqual(withoutIt.map((h) => h.chunkId));
      }
      const withoutNew = await nearest(scan, vectorQuestion);
      expect(withoutNew).not.toEqual(withNew);
      for (const deps of [app.deps, peer.deps]) expect(await nearest(deps.vectorIndexes, vectorQuestion)).toEqual(withoutNew);
    } finally {
      await peer.deps.lexicalIndexes.idle();
      await peer.deps.vectorIndexes.idle();
      await peer.stop();
    }
  });
});
