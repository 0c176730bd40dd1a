import { sql, type Kysely, type Transaction } from 'kysely';
import type { DB } from '../../db/types.ts';
import { BM25_DEFAULT_B, BM25_DEFAULT_K1, termFrequencies } from '../../adapters/outbound/text/text-analysis.ts';

/** The search SQL of the knowledge base: BM25 over the postings, vectors (pgvector or stored arrays), passages. */

type Db = Kysely<DB> | Transaction<DB>;

// BM25 with the same formula and parameters as Bm25Index in text-analysis.ts, which tests hold this SQL to.
const K1 = BM25_DEFAULT_K1;
const B = BM25_DEFAULT_B;

export async function lexicalSearch(db: Kysely<DB>, configId: string, queryTerms: string[], limit: number) {
  const tf = termFrequencies(queryTerms);
  if (tf.size === 0) return [];
  const terms = [...tf.keys()];
  const weights = terms.map((t) => tf.get(t)!);
  const { rows } = await sql<{ chunk_id: string; score: number }>`
    with q as (select * from unnest(cast(${terms} as text[]), cast(${weights} as int[])) as q(term, qtf)),
    stats as (select count(*)::float8 as n, coalesce(avg(term_count), 1)::float8 as avgdl from kb_chunks where config_id = ${configId}),
    df as (
      select p.term, count(*)::float8 as df from kb_postings p join q on q.term = p.term
      where p.config_id = ${configId} group by p.term
    )
    select p.chunk_id,
      sum(q.qtf * ln(1 + (stats.n - df.df + 0.5) / (df.df + 0.5))
          * (p.tf * ${K1 + 1}::float8) / (p.tf + ${K1}::float8 * (1 - ${B}::float8 + ${B}::float8 * c.term_count / stats.avgdl))) as score
    from kb_postings p
      join q on q.term = p.term
      join df on df.term = p.term
      join kb_chunks c on c.id = p.chunk_id
      cross join stats
    where p.config_id = ${configId}
    group by p.chunk_id
    order by score desc, p.chunk_id
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

/** Whether kb_vectors has the pgvector `vec` column (the migration adds it where the extension exists). */
export async function hasVecColumn(db: Db): Promise<boolean> {
  const { rows } = await sql<{ present: boolean }>`
    select exists (select 1 from information_schema.columns where table_name = 'kb_vectors' and column_name = 'vec') as present`.execute(db);
  return rows[0]?.present ?? false;
}

const arrayLiteral = (v: Float32Array | number[]) => `{${Array.from(v).join(',')}}`;
const vectorLiteral = (v: Float32Array | number[]) => `[${Array.from(v).join(',')}]`;

/** Writes vectors of one embedding version. With pgvector present, the `vec` copy is filled too. */
/**
 * Rows go in as arrays (unnest), so the statement's text does not depend on the row count: parsed and planned
 * once, and a batch of documents' vectors is one or two statements.
 */
export async function insertVectorRows(db: Db, rows: Array<{ chunkId: string; configId: string; version: number; vector: Float32Array }>, withVec: boolean) {
  for (let i = 0; i < rows.length; i += 1000) {
    const batch = rows.slice(i, i + 1000);
    const ids = batch.map((r) => r.chunkId);
    const configs = batch.map((r) => r.configId);
    const versions = batch.map((r) => r.version);
    const embeddings = batch.map((r) => arrayLiteral(r.vector));
    await (withVec
      ? sql`insert into kb_vectors (chunk_id, config_id, version, embedding, vec)
            select chunk_id::uuid, config_id::uuid, version, embedding::real[], vec::vector
            from unnest(cast(${ids} as text[]), cast(${configs} as text[]), cast(${versions} as int[]), cast(${embeddings} as text[]),
                        cast(${batch.map((r) => vectorLiteral(r.vector))} as text[]))
              as v(chunk_id, config_id, version, embedding, vec)
            on conflict (chunk_id, version) do nothing`
      : sql`insert into kb_vectors (chunk_id, config_id, version, embedding)
            select chunk_id::uuid, config_id::uuid, version, embedding::real[]
            from unnest(cast(${ids} as text[]), cast(${configs} as text[]), cast(${versions} as int[]), cast(${embeddings} as text[]))
              as v(chunk_id, config_id, version, embedding)
            on conflict (chunk_id, version) do nothing`
    ).execute(db);
  }
}

/** A page of the stored vectors of one version in chunk id order, after `after` (for the in-memory matrix). */
export function loadVectorPage(db: Kysely<DB>, configId: string, version: number, after: string | null, limit: number) {
  let query = db.selectFrom('kb_vectors').select(['chunk_id', 'embedding']).where('config_id', '=', configId).where('version', '=', version);
  if (after !== null) query = query.where('chunk_id', '>', after);
  return query.orderBy('chunk_id').limit(limit).execute();
}

/** Top-k by cosine similarity with pgvector (an exact scan). */
export async function nearestVectors(db: Kysely<DB>, params: { configId: string; version: number; query: Float32Array; limit: number }) {
  // The query vector is a parameter of type vector, converted once at bind time: a cast in the statement is
  // evaluated per row by a generic plan (a prepared statement's plan after five runs), ten times slower.
  const { rows } = await sql<{ chunk_id: string; similarity: number }>`
      with q as (select ${vectorLiteral(params.query)}::vector as v)
      select chunk_id, 1 - (vec <=> q.v) as similarity
      from kb_vectors, q where config_id = ${params.configId} and version = ${params.version}
      order by vec <=> q.v, chunk_id
      limit ${params.limit}`.execute(db);
  return rows.map((r) => ({ chunkId: r.chunk_id, similarity: Number(r.similarity) }));
}

/** The configuration's content version (bumped with every change of its chunks), or undefined when it is gone. */
export const contentVersionOf = async (db: Kysely<DB>, configId: string) =>
  (await db.selectFrom('kb_configs').select('content_version').where('id', '=', configId).executeTakeFirst())?.content_version;

/** A page of the configuration's chunks in id order, after `after`: what an in-memory index needs of them. */
export function loadChunkPage(db: Kysely<DB>, configId: string, after: string | null, limit: number) {
  let query = db.selectFrom('kb_chunks').select(['id', 'term_count']).where('config_id', '=', configId);
  if (after !== null) query = query.where('id', '>', after);
  return query.orderBy('id').limit(limit).execute();
}

/** The postings of these chunks. */
export const loadPostingsOf = (db: Kysely<DB>, configId: string, chunkIds: string[]) =>
  db.selectFrom('kb_postings').select(['chunk_id', 'term', 'tf']).where('config_id', '=', configId).where('chunk_id', 'in', chunkIds).execute();
