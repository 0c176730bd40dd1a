import { sql, type Kysely } from 'kysely';

/**
 * A chunk's analysed terms and their frequencies live on its row (two parallel arrays) instead of one kb_postings
 * row per (chunk, term): writing a document was mostly those rows (on PGlite 13 µs a posting with its foreign-key
 * check and two indexes; about 1 µs as arrays). BM25 in SQL finds a term's chunks through a GIN index on the
 * arrays; the in-memory index reads them with the chunk.
 */
export async function up(db: Kysely<any>) {
  await sql`alter table kb_chunks add column terms text[] not null default '{}', add column tfs int[] not null default '{}'`.execute(db);
  await sql`
    update kb_chunks c set terms = p.terms, tfs = p.tfs
    from (select chunk_id, array_agg(term order by term) as terms, array_agg(tf order by term) as tfs from kb_postings group by chunk_id) as p
    where p.chunk_id = c.id`.execute(db);
  await sql`alter table kb_chunks alter column terms drop default, alter column tfs drop default`.execute(db);
  await sql`drop table kb_postings`.execute(db);
  await sql`create index kb_chunks_terms_idx on kb_chunks using gin (terms)`.execute(db);
}

export async function down(db: Kysely<any>) {
  await sql`
    create table kb_postings (
      config_id uuid not null, term text not null, chunk_id uuid not null references kb_chunks (id) on delete cascade, tf integer not null)`.execute(db);
  await sql`
    insert into kb_postings (config_id, term, chunk_id, tf)
    select c.config_id, u.term, c.id, u.tf from kb_chunks c, unnest(c.terms, c.tfs) as u(term, tf)`.execute(db);
  await sql`create index kb_postings_lookup_idx on kb_postings (config_id, term)`.execute(db);
  await sql`create index kb_postings_chunk_idx on kb_postings (chunk_id)`.execute(db);
  await sql`drop index kb_chunks_terms_idx`.execute(db);
  await sql`alter table kb_chunks drop column terms, drop column tfs`.execute(db);
}
