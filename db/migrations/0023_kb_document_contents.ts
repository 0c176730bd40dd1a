import { sql, type Kysely } from 'kysely';

/**
 * The bytes of small uploaded documents, kept in the database instead of a file (blob_key null then). A file cost
 * an upload three thread-pool calls to write and its processing four more to read, each a hand-over to another
 * thread that cost the request thread more than the bytes: for a small document, a row written in the upload's own
 * statement is far cheaper, and goes with the document on every deletion (cascade) and in every backup.
 */
export async function up(db: Kysely<any>) {
  await sql`create table kb_document_contents (
    document_id uuid primary key references kb_documents (id) on delete cascade,
    bytes bytea not null
  )`.execute(db);
  await sql`alter table kb_documents alter column blob_key drop not null`.execute(db);
}

/** Refuses while any document keeps its bytes here: the older code could not read them, and they have no file. */
export async function down(db: Kysely<any>) {
  const { rows } = await sql<{ n: number }>`select count(*)::int as n from kb_documents where blob_key is null`.execute(db);
  const inline = Number(rows[0]?.n ?? 0);
  if (inline > 0) throw new Error(`cannot roll back: ${inline} documents keep their uploaded bytes in the database (delete them first)`);
  await sql`alter table kb_documents alter column blob_key set not null`.execute(db);
  await sql`drop table kb_document_contents`.execute(db);
}
