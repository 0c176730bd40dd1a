import type { Kysely, Transaction } from 'kysely';
import type { DB } from '../../db/types.ts';
import { hasVecColumn, insertVectorRows } from './search-repository.ts';

/**
 * How similarity search falls back when a knowledge base's vectors are not in memory (vector-index.ts): pgvector
 * in SQL where the database has it, an exact scan in the service otherwise.
 */
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
