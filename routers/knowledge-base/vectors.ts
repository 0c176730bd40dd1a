import { sql, type Kysely, type Transaction } from 'kysely';
import type { DB } from '../../db/types.ts';

/** How similarity search runs: pgvector in SQL where the database has it, exact scoring in process otherwise. */
export type VectorSearchMode = 'pgvector' | 'exact';

export async function detectVectorSearch(db: Kysely<DB>, preference: 'auto' | 'exact'): Promise<VectorSearchMode> {
  if (preference === 'exact') return 'exact';
  const { rows } = await sql<{ present: boolean }>`
    select exists (select 1 from information_schema.columns where table_name = 'kb_vectors' and column_name = 'vec') as present`.execute(db);
  return rows[0]?.present ? 'pgvector' : 'exact';
}

export async function hasVecColumn(db: Kysely<DB> | Transaction<DB>): Promise<boolean> {
  const { rows } = await sql<{ present: boolean }>`
    select exists (select 1 from information_schema.columns where table_name = 'kb_vectors' and column_name = 'vec') as present`.execute(db);
  return rows[0]?.present ?? false;
}

const arrayLiteral = (v: Float32Array | number[]) => `{${Array.from(v).join(',')}}`;
const vectorLiteral = (v: Float32Array | number[]) => `[${Array.from(v).join(',')}]`;

/** Writes vectors of one embedding version. With pgvector present, the `vec` copy is filled too. */
export const isZeroVector = (v: Float32Array) => v.every((x) => x === 0);

export async function insertVectors(db: Kysely<DB> | Transaction<DB>, allRows: Array<{ chunkId: string; configId: string; version: number; vector: Float32Array }>, withVec: boolean) {
  // A text with no letters or digits embeds to zero: it has no direction, so it gets no vector (lexical only).
  const rows = allRows.filter((r) => !isZeroVector(r.vector));
  for (let i = 0; i < rows.length; i += 200) {
    const batch = rows.slice(i, i + 200);
    const values = batch.map((r) =>
      withVec
        ? sql`(${r.chunkId}::uuid, ${r.configId}::uuid, ${r.version}::int, cast(${arrayLiteral(r.vector)}::text as real[]), cast(${vectorLiteral(r.vector)}::text as vector))`
        : sql`(${r.chunkId}::uuid, ${r.configId}::uuid, ${r.version}::int, cast(${arrayLiteral(r.vector)}::text as real[]))`,
    );
    await (withVec
      ? sql`insert into kb_vectors (chunk_id, config_id, version, embedding, vec) values ${sql.join(values)} on conflict (chunk_id, version) do nothing`
      : sql`insert into kb_vectors (chunk_id, config_id, version, embedding) values ${sql.join(values)} on conflict (chunk_id, version) do nothing`
    ).execute(db);
  }
}

interface Matrix {
  ids: string[];
  dims: number;
  data: Float32Array;
}
const matrices = new Map<string, Matrix>();
const MAX_CACHED_MATRICES = 32;

async function loadMatrix(db: Kysely<DB>, configId: string, version: number, contentVersion: number): Promise<Matrix> {
  const key = `${configId}:${version}:${contentVersion}`;
  const cached = matrices.get(key);
  if (cached) return cached;
  const rows = await db.selectFrom('kb_vectors').select(['chunk_id', 'embedding']).where('config_id', '=', configId).where('version', '=', version).orderBy('chunk_id').execute();
  const dims = rows[0]?.embedding.length ?? 0;
  const data = new Float32Array(rows.length * dims);
  rows.forEach((r, i) => data.set(r.embedding.map(Number), i * dims));
  const matrix = { ids: rows.map((r) => r.chunk_id), dims, data };
  for (const k of matrices.keys()) if (k.startsWith(`${configId}:`)) matrices.delete(k);
  if (matrices.size >= MAX_CACHED_MATRICES) matrices.delete(matrices.keys().next().value!);
  matrices.set(key, matrix);
  return matrix;
}

/**
 * Top-k chunks by cosine similarity (vectors are unit length, so the dot product). Both modes scan
 * exactly, so they return the same chunks on the same data; pgvector does it inside the database.
 */
export async function searchVectors(
  db: Kysely<DB>,
  mode: VectorSearchMode,
  params: { configId: string; version: number; contentVersion: number; query: Float32Array; limit: number },
): Promise<Array<{ chunkId: string; similarity: number }>> {
  if (mode === 'pgvector') {
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
  const matrix = await loadMatrix(db, params.configId, params.version, params.contentVersion);
  if (matrix.dims !== params.query.length) return [];
  const scores = new Float32Array(matrix.ids.length);
  for (let row = 0; row < matrix.ids.length; row++) {
    let dot = 0;
    const base = row * matrix.dims;
    for (let d = 0; d < matrix.dims; d++) dot += matrix.data[base + d]! * params.query[d]!;
    scores[row] = dot;
  }
  const order = Array.from(matrix.ids.keys());
  order.sort((a, b) => scores[b]! - scores[a]! || (matrix.ids[a]! < matrix.ids[b]! ? -1 : 1));
  return order.slice(0, params.limit).map((i) => ({ chunkId: matrix.ids[i]!, similarity: scores[i]! }));
}
