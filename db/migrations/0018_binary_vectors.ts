import { sql, type Kysely } from 'kysely';

/**
 * Vectors are stored as bytes (float32, big-endian: PostgreSQL's own binary form of `real`, what float4send
 * gives) instead of `real[]` plus a pgvector copy. Parsing their text form was most of a document's write time
 * (on PGlite 1.15 ms a vector with the copy, 0.15 ms as bytes), and similarity search runs in the service
 * (routers/knowledge-base/vector-index.ts), so the copy had no reader left but a fallback.
 */
export async function up(db: Kysely<any>) {
  await sql`alter table kb_vectors add column embedding_bytes bytea`.execute(db);
  await sql`
    update kb_vectors set embedding_bytes = coalesce(
      (select string_agg(float4send(x), ''::bytea order by i) from unnest(embedding) with ordinality as u(x, i)), ''::bytea)`.execute(db);
  await sql`alter table kb_vectors drop column embedding`.execute(db);
  await sql`alter table kb_vectors drop column if exists vec`.execute(db);
  await sql`alter table kb_vectors rename column embedding_bytes to embedding`.execute(db);
  await sql`alter table kb_vectors alter column embedding set not null`.execute(db);
}

/** Back to real[] (the pgvector copy is not restored): each 4 bytes decoded from sign, exponent and fraction bits (exponent 255: infinity or NaN). */
export async function down(db: Kysely<any>) {
  await sql`alter table kb_vectors add column embedding_array real[]`.execute(db);
  await sql`
    update kb_vectors set embedding_array = array(
      select (case when f.e = 255 then (case when f.m = 0 then 'Infinity'::float8 else 'NaN'::float8 end)
                   when f.e = 0 then f.m * 2 ^ -149 else (1 + f.m / 8388608.0) * 2 ^ (f.e - 127) end
              * case when s.b < 0 then -1 else 1 end)::real
      from (select ('x' || encode(substring(embedding from i for 4), 'hex'))::bit(32)::int as b, i
            from generate_series(1, length(embedding), 4) as i) as s,
        lateral (select (s.b >> 23) & 255 as e, s.b & 8388607 as m) as f
      order by s.i)`.execute(db);
  await sql`alter table kb_vectors drop column embedding`.execute(db);
  await sql`alter table kb_vectors rename column embedding_array to embedding`.execute(db);
  await sql`alter table kb_vectors alter column embedding set not null`.execute(db);
}
