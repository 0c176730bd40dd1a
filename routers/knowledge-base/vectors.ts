import type { Kysely, Transaction } from 'kysely';
import type { DB } from '../../db/types.ts';
import { insertVectorRows } from './search-repository.ts';

export const isZeroVector = (v: Float32Array) => v.every((x) => x === 0);

/** Writes vectors of one embedding version. */
export async function insertVectors(
  db: Kysely<DB> | Transaction<DB>,
  rows: Array<{ chunkId: string; configId: string; version: number; vector: Float32Array }>,
) {
  // A text with no letters or digits embeds to zero: it has no direction, so it gets no vector (lexical only).
  await insertVectorRows(
    db,
    rows.filter((r) => !isZeroVector(r.vector)),
  );
}
