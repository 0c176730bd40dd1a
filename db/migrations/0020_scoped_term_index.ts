import { sql, type Kysely } from 'kysely';

/**
 * The GIN index on a chunk's terms is keyed by its knowledge base too (btree_gin puts the uuid in the same index):
 * BM25 in SQL, the answer whenever a knowledge base's in-memory index is not built or too large to hold, looked a
 * term up across every tenant's chunks and filtered by knowledge base afterwards, so one tenant's large collection
 * slowed every other tenant's queries on the same terms.
 */
export async function up(db: Kysely<any>) {
  await sql`create extension if not exists btree_gin`.execute(db);
  await sql`create index kb_chunks_config_terms_idx on kb_chunks using gin (config_id, terms)`.execute(db);
  await sql`drop index kb_chunks_terms_idx`.execute(db);
}

export async function down(db: Kysely<any>) {
  await sql`create index kb_chunks_terms_idx on kb_chunks using gin (terms)`.execute(db);
  await sql`drop index kb_chunks_config_terms_idx`.execute(db);
}
