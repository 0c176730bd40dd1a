import { sql, type Kysely } from 'kysely';

/**
 * Why the last switch to a knowledge base's target embedding model failed (its re-embedding job died), or null.
 * Without it a dead re-embedding left the configuration re-embedding for ever; with it the configuration shows
 * the failure, the old model keeps serving, and saving the embedding settings again starts a new attempt.
 */
export async function up(db: Kysely<any>) {
  await sql`alter table kb_configs add column embedding_error text`.execute(db);
  // The sweep looks for switches in progress every minute or so; they are few among all configurations.
  await sql`create index kb_configs_switching_idx on kb_configs (id) where serving_version <> embedding_version and embedding_error is null`.execute(db);
}

export async function down(db: Kysely<any>) {
  await sql`drop index if exists kb_configs_switching_idx`.execute(db);
  await sql`alter table kb_configs drop column embedding_error`.execute(db);
}
