import type { Kysely, Transaction } from 'kysely';
import type { DB } from '../../db/types.ts';
import { hasVecColumn, insertVectorRows, loadVectors, nearestVectors } from './search-repository.ts';

/** How similarity search runs: pgvector in SQL where the database has it, exact scoring in process otherwise. */
export type VectorSearchMode = 'pgvector' | 'exact';

export async function detectVectorSearch(db: Kysely<DB>, preference: 'auto' | 'exact'): Promise<VectorSearchMode> {
  if (preference === 'exact') return 'exact';
  return (await hasVecColumn(db)) ? 'pgvector' : 'exact';
}

export const isZeroVector = (v: Float32Array) => v.every((x) => x === 0);

/** Writes vectors of one embedding version. With pgvector present, the `vec` copy is filled too. */
export async function insertVectors(
  db: Kysely<DB> | Transaction<DB>,
  rows: Array<{ chunkId: string; configId: string; version: number; vector: Float32Array }>,
  withVec: boolean,
) {
  // A text with no letters or digits embeds to zero: it has no direction, so it gets no vector (lexical only).
  await insertVectorRows(
    db,
    rows.filter((r) => !isZeroVector(r.vector)),
    withVec,
  );
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
  const rows = await loadVectors(db, configId, version);
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
  if (mode === 'pgvector') return nearestVectors(db, params);
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
