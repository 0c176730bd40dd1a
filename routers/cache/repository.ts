import { sql, type Kysely } from 'kysely';
import type { DB } from '../../db/types.ts';
import { jsonb } from '../../db/json.ts';

/** Replaces the owner's saved cache (one row per owner). */
export async function saveQueryCache(db: Kysely<DB>, ownerId: string, cache: { data: unknown; sizeBytes: number; updatedAt: Date }) {
  await db
    .insertInto('query_cache')
    .values({ owner_id: ownerId, data: jsonb(cache.data), size_bytes: cache.sizeBytes, updated_at: cache.updatedAt })
    .onConflict((oc) => oc.column('owner_id').doUpdateSet({ data: sql`excluded.data`, size_bytes: cache.sizeBytes, updated_at: cache.updatedAt }))
    .execute();
}

export const findQueryCache = (db: Kysely<DB>, ownerId: string) =>
  db.selectFrom('query_cache').select(['data', 'updated_at']).where('owner_id', '=', ownerId).executeTakeFirst();

export async function deleteQueryCache(db: Kysely<DB>, ownerId: string): Promise<boolean> {
  const result = await db.deleteFrom('query_cache').where('owner_id', '=', ownerId).executeTakeFirst();
  return Number(result.numDeletedRows) > 0;
}
