import { sql, type Kysely, type RawBuilder, type Transaction } from 'kysely';
import type { DB } from '../../db/types.ts';
import { BM25_DEFAULT_B, BM25_DEFAULT_K1 } from '../../adapters/outbound/text/bm25.ts';
import { termFrequencies } from '../../adapters/outbound/text/text-analysis.ts';

/** The search SQL of the knowledge base: BM25 over the chunks' terms, stored vectors, passages. */

type Db = Kysely<DB> | Transaction<DB>;

// BM25 with the same formula and parameters as Bm25Index in bm25.ts, which tests hold this SQL to.
const K1 = BM25_DEFAULT_K1;
const B = BM25_DEFAULT_B;

export async function lexicalSearch(db: Kysely<DB>, configId: string, queryTerms: string[], limit: number) {
  const tf = termFrequencies(queryTerms);
  if (tf.size === 0) return [];
  const terms = [...tf.keys()];
  const weights = terms.map((t) => tf.get(t)!);
  // A query term's chunks come from the GIN index on the terms arrays; its frequency in each is the element of
  // tfs at the term's position in terms.
  const { rows } = await sql<{ chunk_id: string; score: number }>`
    with q as (select * from unnest(cast(${terms} as text[]), cast(${weights} as int[])) as q(term, qtf)),
    stats as (select count(*)::float8 as n, coalesce(avg(term_count), 1)::float8 as avgdl from kb_chunks where config_id = ${configId}),
    hits as (
      select c.id as chunk_id, q.term, q.qtf, c.term_count, c.tfs[array_position(c.terms, q.term)]::float8 as tf
      from q join kb_chunks c on c.terms @> array[q.term] and c.config_id = ${configId}
    ),
    df as (select term, count(*)::float8 as df from hits group by term)
    select h.chunk_id,
      sum(h.qtf * ln(1 + (stats.n - df.df + 0.5) / (df.df + 0.5))
          * (h.tf * ${K1 + 1}::float8) / (h.tf + ${K1}::float8 * (1 - ${B}::float8 + ${B}::float8 * h.term_count / stats.avgdl))) as score
    from hits h
      join df on df.term = h.term
      cross join stats
    group by h.chunk_id
    order by score desc, h.chunk_id
    limit ${limit}`.execute(db);
  return rows.map((r) => ({ chunkId: r.chunk_id, score: Number(r.score) }));
}

/** The chunks with their file names, of documents still completed (one may have been deleted meanwhile). */
export const findPassages = (db: Kysely<DB>, chunkIds: string[]) =>
  db
    .selectFrom('kb_chunks')
    .innerJoin('kb_documents', 'kb_documents.id', 'kb_chunks.document_id')
    .select(['kb_chunks.id', 'kb_chunks.document_id', 'kb_chunks.chunk_index', 'kb_chunks.page', 'kb_chunks.text', 'kb_documents.file_name'])
    .where('kb_chunks.id', 'in', chunkIds)
    .where('kb_documents.status', '=', 'completed')
    .execute();

/**
 * Stored vectors are float32 values, big-endian (PostgreSQL's binary form of `real`, what float4send gives):
 * bytes go in and out without the text parsing that a real[] costs per value.
 */
export function encodeVectors(vectors: Float32Array[]): Buffer {
  const width = (vectors[0]?.length ?? 0) * 4;
  const out = Buffer.allocUnsafe(vectors.length * width);
  vectors.forEach((vector, row) => {
    if (vector.length * 4 !== width) throw new Error('vectors of one write must have the same dimensions');
    for (let d = 0; d < vector.length; d++) out.writeFloatBE(vector[d]!, row * width + d * 4);
  });
  return out;
}

/** Decodes stored bytes into `target` from `offset` (the in-memory matrix takes rows with no copy between). */
export function decodeVectorInto(bytes: Uint8Array, target: Float32Array, offset: number): void {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const count = bytes.byteLength >> 2;
  for (let d = 0; d < count; d++) target[offset + d] = view.getFloat32(d * 4, false);
}

export function decodeVector(bytes: Uint8Array): Float32Array {
  const out = new Float32Array(bytes.byteLength >> 2);
  decodeVectorInto(bytes, out, 0);
  return out;
}

/**
 * Row `n` (counted from 1, a column of the statement) of these vectors, cut in SQL out of one bytea parameter that
 * carries them all: a statement's text then does not depend on its row count (parsed and planned once). Every write
 * of vectors uses it, so the stored layout (encodeVectors) is said once.
 */
export function nthVector(vectors: Float32Array[], n: RawBuilder<unknown>) {
  const width = (vectors[0]?.length ?? 0) * 4;
  return sql`substring(${encodeVectors(vectors)}::bytea from (${n} - 1)::int * ${width}::int + 1 for ${width}::int)`;
}

/** Writes vectors of one embedding version, up to 1,000 to a statement. */
export async function insertVectorRows(db: Db, rows: Array<{ chunkId: string; configId: string; version: number; vector: Float32Array }>) {
  for (let i = 0; i < rows.length; i += 1000) {
    const batch = rows.slice(i, i + 1000);
    await sql`insert into kb_vectors (chunk_id, config_id, version, embedding)
        select v.chunk_id::uuid, v.config_id::uuid, v.version, ${nthVector(
          batch.map((r) => r.vector),
          sql.ref('v.n'),
        )}
        from unnest(cast(${batch.map((r) => r.chunkId)} as text[]), cast(${batch.map((r) => r.configId)} as text[]), cast(${batch.map((r) => r.version)} as int[]))
          with ordinality as v(chunk_id, config_id, version, n)
        on conflict (chunk_id, version) do nothing`.execute(db);
  }
}

/** A page of the stored vectors of one version in chunk id order, after `after`, as stored (decodeVector reads them). */
export function loadVectorPage(db: Kysely<DB>, configId: string, version: number, after: string | null, limit: number) {
  let query = db.selectFrom('kb_vectors').select(['chunk_id', 'embedding']).where('config_id', '=', configId).where('version', '=', version);
  if (after !== null) query = query.where('chunk_id', '>', after);
  return query.orderBy('chunk_id').limit(limit).execute();
}

/** The configuration's content version (bumped with every change of its chunks), or undefined when it is gone. */
export const contentVersionOf = async (db: Kysely<DB>, configId: string) =>
  (await db.selectFrom('kb_configs').select('content_version').where('id', '=', configId).executeTakeFirst())?.content_version;

/** A page of the configuration's chunks in id order, after `after`, with their terms: what the in-memory BM25 index needs. */
export function loadChunkPage(db: Kysely<DB>, configId: string, after: string | null, limit: number) {
  let query = db.selectFrom('kb_chunks').select(['id', 'term_count', 'terms', 'tfs']).where('config_id', '=', configId);
  if (after !== null) query = query.where('id', '>', after);
  return query.orderBy('id').limit(limit).execute();
}
