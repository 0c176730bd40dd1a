import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { type KyselyPlugin, RawNode, type ValueNode } from 'kysely';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/test-app.ts';
import { until } from '../helpers/eventually.ts';
import { INLINE_CONTENT_MAX_BYTES } from '../../routers/knowledge-base/documents-router.ts';

/**
 * An upload's insert whose outcome its caller never learns: the statement commits, then the answer is lost (as when
 * the connection drops after COMMIT). The file an upload put in the blob store must outlive such an error whenever
 * the committed row holds it, or the document can never be processed.
 */

/** Drives the upload statements (insert into kb_documents ... one row per upload) as the test asks. */
const uploadStatements = {
  /** Statements of more than one upload to fail after they committed. */
  failGroups: 0,
  /** Statements of one upload to fail after they committed. */
  failSingles: 0,
  /** Statements of one upload the database refuses (never run), with this SQLSTATE. */
  refuseSingles: 0,
  refusal: '40P01',
  /** Results of the next statements held until `release` is called. */
  hold: 0,
  held: [] as Array<() => void>,
  failed: 0,
};
const failing = new Set<string>();
const holding = new Set<string>();

const lostAnswers: KyselyPlugin = {
  transformQuery({ node, queryId }) {
    if (RawNode.is(node) && node.sqlFragments.join('?').includes('insert into kb_documents')) {
      const rows = ((node.parameters[0] as ValueNode | undefined)?.value as unknown[] | undefined)?.length ?? 0;
      if (uploadStatements.hold > 0) {
        uploadStatements.hold--;
        holding.add(queryId.queryId);
      } else if (rows > 1 && uploadStatements.failGroups > 0) {
        uploadStatements.failGroups--;
        failing.add(queryId.queryId);
      } else if (rows === 1 && uploadStatements.refuseSingles > 0) {
        uploadStatements.refuseSingles--;
        throw Object.assign(new Error('deadlock detected'), { code: uploadStatements.refusal });
      } else if (rows === 1 && uploadStatements.failSingles > 0) {
        uploadStatements.failSingles--;
        failing.add(queryId.queryId);
      }
    }
    return node;
  },
  async transformResult({ result, queryId }) {
    if (holding.delete(queryId.queryId)) await new Promise<void>((resolve) => uploadStatements.held.push(resolve));
    if (failing.delete(queryId.queryId)) {
      uploadStatements.failed++;
      throw Object.assign(new Error('write CONNECTION_CLOSED 127.0.0.1:5432'), { code: 'CONNECTION_CLOSED' });
    }
    return result;
  },
};

let app: TestApp;
let a: { token: string };
let b: { token: string };

const blobLargerThanInline = (text: string) => Buffer.from(text.repeat(Math.ceil((INLINE_CONTENT_MAX_BYTES + 1) / text.length)));
const upload = (token: string, configId: string, fileName: string, bytes: Buffer) =>
  app.upload('/api/v1/knowledge-base/documents', { token, fileName, bytes, fields: { configId } });
const newConfig = async (token: string, name: string) =>
  (await app.request('POST', '/api/v1/knowledge-base/configs', { token, body: { name } })).body.data.config.id as string;

async function settledDocuments(token: string, configId: string) {
  return until(async () => {
    const docs = (await app.request('GET', `/api/v1/knowledge-base/documents?configId=${configId}`, { token })).body.data.documents as Array<
      Record<string, any>
    >;
    return docs.every((d) => d.status !== 'processing') ? docs : undefined;
  }, 'documents processed');
}

const blobPath = async (documentId: string) => {
  const row = await app.deps.database.db.selectFrom('kb_documents').select('blob_key').where('id', '=', documentId).executeTakeFirstOrThrow();
  return join(app.deps.config.DATA_DIR, 'blobs', row.blob_key!);
};

/** Files whose put has finished: the upload's insert follows in the same continuation. */
let putsDone = 0;

beforeAll(async () => {
  app = await startTestApp({ RATE_LIMIT_UPLOAD: '1000' });
  const put = app.deps.blobs.put.bind(app.deps.blobs);
  app.deps.blobs.put = async (prefix, bytes) => {
    const key = await put(prefix, bytes);
    putsDone++;
    return key;
  };
  // Before any upload: the uploads' statements are built on the database this instance's uploads first see.
  app.deps.database.db = app.deps.database.db.withPlugin(lostAnswers);
  a = await app.signUp('outcome-a');
  b = await app.signUp('outcome-b');
});
afterEach(() => {
  Object.assign(uploadStatements, { failGroups: 0, failSingles: 0, refuseSingles: 0, hold: 0 });
  for (const release of uploadStatements.held.splice(0)) release();
});
afterAll(() => app?.stop());

describe('an upload whose insert committed but whose answer was lost', () => {
  it('keeps the file: the document is processed, and the same upload again finds it', async () => {
    const configId = await newConfig(a.token, 'Lost answer');
    const bytes = blobLargerThanInline('Heat pumps move heat from the outside air into the house. ');
    uploadStatements.failSingles = 1;
    const lost = await upload(a.token, configId, 'heat.txt', bytes);
    expect(lost.status).toBe(500);
    expect(lost.text).not.toContain('CONNECTION_CLOSED');
    expect(uploadStatements.failed).toBe(1);

    const [document] = await settledDocuments(a.token, configId);
    expect(document).toMatchObject({ fileName: 'heat.txt', status: 'completed' });
    expect(existsSync(await blobPath(document!.id))).toBe(true);
    const again = await upload(a.token, configId, 'heat.txt', bytes);
    expect(again.status).toBe(200);
    expect(again.body.data).toMatchObject({ duplicate: true, document: { id: document!.id, status: 'completed' } });
  });

  it('an insert the database refused frees the file it would have held', async () => {
    const configId = await newConfig(a.token, 'Refused insert');
    uploadStatements.refuseSingles = 1;
    const refused = await upload(a.token, configId, 'refused.txt', blobLargerThanInline('A refused upload leaves nothing behind. '));
    expect(refused.status).toBe(500);
    expect(refused.text).not.toContain('deadlock');
    expect(await settledDocuments(a.token, configId)).toEqual([]);
    const blobFolder = join(app.deps.config.DATA_DIR, 'blobs', configId);
    expect(existsSync(blobFolder) ? readdirSync(blobFolder) : []).toEqual([]);
  });

  it("a group's statement reported failed after it committed: each upload is still a new document with its file", async () => {
    const configId = await newConfig(a.token, 'Lost group answer');
    const otherOwnersConfig = await newConfig(b.token, 'Same contents elsewhere');
    const files = Array.from({ length: 6 }, (_, i) => blobLargerThanInline(`Grouped upload number ${i} about heat pumps. `));
    // The first two statements (two uploads alone) are held, so the next four wait and go in one statement.
    uploadStatements.hold = 2;
    uploadStatements.failGroups = 1;
    const failedBefore = uploadStatements.failed;
    const putsBefore = putsDone;
    const answers = Promise.all(files.map((bytes, i) => upload(a.token, configId, `grouped-${i}.txt`, bytes)));
    await until(async () => (uploadStatements.held.length === 2 ? true : undefined), 'the first two statements held');
    // Another owner's upload of the same content goes on meanwhile: grouping never spans knowledge bases.
    const elsewhere = await upload(b.token, otherOwnersConfig, 'grouped-0.txt', files[0]!);
    expect(elsewhere.status).toBe(201);
    // Every upload asks for its insert as soon as its file is put: once all six are, the four wait behind the two.
    await until(async () => (putsDone - putsBefore === 7 ? true : undefined), 'all files put');
    for (const release of uploadStatements.held.splice(0)) release();

    const settled = await answers;
    expect(uploadStatements.failed - failedBefore).toBe(1);
    for (const [i, answer] of settled.entries()) {
      expect(answer.status, `upload ${i}: ${answer.text}`).toBe(201);
      expect(answer.body.data).toMatchObject({ duplicate: false, document: { fileName: `grouped-${i}.txt` } });
    }
    const documents = await settledDocuments(a.token, configId);
    expect(documents.map((d) => d.status)).toEqual(Array(6).fill('completed'));
    for (const document of documents) expect(existsSync(await blobPath(document.id))).toBe(true);
    expect(new Set(documents.map((d) => d.id))).toEqual(new Set(settled.map((r) => r.body.data.document.id)));
    expect((await settledDocuments(b.token, otherOwnersConfig)).map((d) => d.status)).toEqual(['completed']);
  });
});
