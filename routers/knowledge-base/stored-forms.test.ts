import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import * as binaryVectors from '../../db/migrations/0018_binary_vectors.ts';
import * as chunkTerms from '../../db/migrations/0019_chunk_terms.ts';
import { perFileTestDatabase } from '../../test/helpers/test-database.ts';
import { replaceChunks } from './ingest-repository.ts';
import { decodeVector, encodeVectors, insertVectorRows, loadChunkPage, loadVectorPage } from './search-repository.ts';

/**
 * The stored forms of a knowledge base's search data. Vectors (float32 big-endian bytes): the codec, its agreement
 * with PostgreSQL's own binary form of `real`, a write and read back, and migration 0018 both ways. A chunk's terms
 * (two arrays on its row): any term content written and read back, and migration 0019 both ways. On the test
 * file's own migrated database (PGlite, or PostgreSQL with DATABASE_URL).
 */
const testDatabase = perFileTestDatabase();
const { inRolledBackTransaction } = testDatabase;

const SPECIAL = [0, -0, 1, -1, 0.1, -2.5e-3, 3.4028234663852886e38, 1.401298464324817e-45, -1.1754942106924411e-38, 123456.789];
/** What survives a trip as a query parameter: the drivers write -0 as "0". */
const SPECIAL_SQL = SPECIAL.filter((x) => !Object.is(x, -0));

describe('stored vectors', () => {
  it('encode and decode give back every float32 value, zero signs and extremes included', () => {
    const vectors = [Float32Array.from(SPECIAL), Float32Array.from(SPECIAL.map((x) => -x / 3))];
    const bytes = encodeVectors(vectors);
    expect(bytes.length).toBe(2 * SPECIAL.length * 4);
    const width = SPECIAL.length * 4;
    vectors.forEach((vector, row) => {
      const decoded = decodeVector(bytes.subarray(row * width, (row + 1) * width));
      expect(Array.from(decoded).map((x) => (Object.is(x, -0) ? '-0' : x))).toEqual(Array.from(vector).map((x) => (Object.is(x, -0) ? '-0' : x)));
    });
    expect(() => encodeVectors([new Float32Array(3), new Float32Array(4)])).toThrow(/same dimensions/);
  });

  it('the bytes are what PostgreSQL gives as the binary form of real (float4send)', async () => {
    const { rows } = await sql<{ bytes: Uint8Array }>`
      select string_agg(float4send(x), ''::bytea order by i) as bytes
      from unnest(cast(${SPECIAL_SQL} as real[])) with ordinality as u(x, i)`.execute(testDatabase.database.db);
    expect(Buffer.from(rows[0]!.bytes).equals(encodeVectors([Float32Array.from(SPECIAL_SQL)]))).toBe(true);
  });

  it('rows written in one statement read back in chunk order with their own vectors', async () => {
    await inRolledBackTransaction(async (trx) => {
      const configId = randomUUID();
      const rows = Array.from({ length: 1203 }, (_, i) => ({
        chunkId: randomUUID(),
        configId,
        version: 1,
        vector: Float32Array.from({ length: 8 }, (_, d) => Math.sin(i * 8 + d)),
      }));
      await insertVectorRows(trx, rows);
      await insertVectorRows(trx, rows.slice(0, 5)); // a retried write changes nothing
      const read = [];
      for (let after: string | null = null; ; ) {
        const page = await loadVectorPage(trx as never, configId, 1, after, 500);
        if (page.length === 0) break;
        read.push(...page);
        after = page.at(-1)!.chunk_id;
      }
      const expected = [...rows].sort((a, b) => (a.chunkId < b.chunkId ? -1 : 1));
      expect(read.map((r) => r.chunk_id)).toEqual(expected.map((r) => r.chunkId));
      read.forEach((r, i) => expect(Array.from(decodeVector(r.embedding))).toEqual(Array.from(expected[i]!.vector)));
    });
  });

  it('migration 0018 turns stored real[] vectors into the same bytes, and back', async () => {
    await inRolledBackTransaction(async (trx) => {
      await binaryVectors.down(trx);
      const vectors = [SPECIAL_SQL, [0.5, -0.125, 1e-3, 42.5, -1e30, 7e-40], [0.25, -0.5, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY, Number.NaN]].map(
        (v) => Float32Array.from(v),
      );
      const ids = vectors.map(() => randomUUID());
      const configId = randomUUID();
      for (const [i, vector] of vectors.entries()) {
        await sql`insert into kb_vectors (chunk_id, config_id, version, embedding) values (${ids[i]}, ${configId}, 1, cast(${Array.from(vector)} as real[]))`.execute(
          trx,
        );
      }
      await binaryVectors.up(trx);
      for (const [i, vector] of vectors.entries()) {
        const row = await trx.selectFrom('kb_vectors').select('embedding').where('chunk_id', '=', ids[i]!).executeTakeFirstOrThrow();
        expect(Buffer.from(row.embedding).toString('hex')).toBe(encodeVectors([vector]).toString('hex'));
      }
      await binaryVectors.down(trx);
      for (const [i, vector] of vectors.entries()) {
        const { rows } = await sql<{ embedding: number[] }>`select embedding from kb_vectors where chunk_id = ${ids[i]}`.execute(trx);
        expect(rows[0]!.embedding.map(Number).map((x) => Math.fround(x))).toEqual(Array.from(vector));
      }
      await binaryVectors.up(trx);
    });
  });

  it("a chunk's terms and frequencies, and its vector if it has one, are written with it and read back whatever characters the terms hold", async () => {
    await inRolledBackTransaction(async (trx) => {
      const configId = randomUUID();
      const documentId = randomUUID();
      const terms = ['plain', 'quo"te', 'back\\slash', 'com,ma', '{brace}', 'NULL', 'sp ace', 'ünï', ''];
      const chunk = { id: randomUUID(), documentId, index: 0, page: null, text: 'x', termCount: 12, tokenCount: 3, terms, tfs: terms.map((_, i) => i + 1) };
      const empty = { ...chunk, id: randomUUID(), index: 1, terms: [], tfs: [] };
      const vector = Float32Array.from([0.25, -1.5, 3e-7, 65504]);
      await replaceChunks(trx, configId, 3, [documentId], [{ ...chunk, vector }, empty]);
      const page = await loadChunkPage(trx as never, configId, null, 10);
      const byId = new Map(page.map((row) => [row.id, row]));
      expect(byId.get(chunk.id)).toMatchObject({ term_count: 12, terms, tfs: chunk.tfs });
      expect(byId.get(empty.id)).toMatchObject({ terms: [], tfs: [] });
      const stored = await loadVectorPage(trx as never, configId, 3, null, 10);
      expect(stored.map((row) => [row.chunk_id, Array.from(decodeVector(row.embedding))])).toEqual([[chunk.id, Array.from(vector)]]);
    });
  });

  it('migration 0019 moves the postings onto their chunks, and back', async () => {
    await inRolledBackTransaction(async (trx) => {
      await chunkTerms.down(trx);
      const configId = randomUUID();
      const chunks = [randomUUID(), randomUUID(), randomUUID()];
      for (const [i, id] of chunks.entries()) {
        await sql`insert into kb_chunks (id, document_id, config_id, chunk_index, text, term_count, token_count)
                  values (${id}, ${randomUUID()}, ${configId}, ${i}, 'text', 5, 5)`.execute(trx);
      }
      const postings = [
        [chunks[0], 'zebra', 2],
        [chunks[0], 'apple', 1],
        [chunks[1], 'mango', 4],
      ] as const;
      for (const [chunkId, term, tf] of postings) {
        await sql`insert into kb_postings (config_id, term, chunk_id, tf) values (${configId}, ${term}, ${chunkId}, ${tf})`.execute(trx);
      }
      await chunkTerms.up(trx);
      const after = await trx.selectFrom('kb_chunks').select(['id', 'terms', 'tfs']).where('config_id', '=', configId).execute();
      const byId = new Map(after.map((row) => [row.id, row]));
      expect(byId.get(chunks[0]!)).toMatchObject({ terms: ['apple', 'zebra'], tfs: [1, 2] });
      expect(byId.get(chunks[1]!)).toMatchObject({ terms: ['mango'], tfs: [4] });
      expect(byId.get(chunks[2]!)).toMatchObject({ terms: [], tfs: [] });
      await chunkTerms.down(trx);
      const { rows } = await sql<{ chunk_id: string; term: string; tf: number }>`
        select chunk_id, term, tf from kb_postings where config_id = ${configId} order by chunk_id, term`.execute(trx);
      const expected = [...postings]
        .map(([chunk_id, term, tf]) => ({ chunk_id, term, tf }))
        .sort((a, b) => (a.chunk_id + a.term < b.chunk_id + b.term ? -1 : 1));
      expect(rows).toEqual(expected);
      await chunkTerms.up(trx);
    });
  });
});
