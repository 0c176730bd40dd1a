import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<any>) {
  // Durable jobs: claimed with FOR UPDATE SKIP LOCKED, held by a renewable lease, retried with backoff,
  // parked as 'dead' after max_attempts. Any number of instances may poll the same table.
  await db.schema
    .createTable('jobs')
    .addColumn('id', 'uuid', (c) => c.primaryKey())
    .addColumn('kind', 'text', (c) => c.notNull())
    .addColumn('payload', 'jsonb', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull().defaultTo('queued').check(sql`status in ('queued','running','done','dead')`))
    .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('max_attempts', 'integer', (c) => c.notNull().defaultTo(5))
    .addColumn('run_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('locked_by', 'text')
    .addColumn('lease_until', 'timestamptz')
    .addColumn('last_error', 'text')
    .addColumn('dedupe_key', 'text')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await sql`create index jobs_ready_idx on jobs (run_at) where status = 'queued'`.execute(db);
  await sql`create index jobs_lease_idx on jobs (lease_until) where status = 'running'`.execute(db);
  await sql`create unique index jobs_dedupe_idx on jobs (dedupe_key) where dedupe_key is not null and status in ('queued','running')`.execute(db);

  await db.schema
    .createTable('kb_configs')
    .addColumn('id', 'uuid', (c) => c.primaryKey())
    .addColumn('owner_id', 'uuid', (c) => c.notNull().references('owners.id').onDelete('cascade'))
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('temperature', 'real', (c) => c.notNull().defaultTo(0.7))
    .addColumn('max_tokens', 'integer', (c) => c.notNull().defaultTo(1024))
    .addColumn('chunk_size', 'integer', (c) => c.notNull().defaultTo(1000))
    .addColumn('chunk_overlap', 'integer', (c) => c.notNull().defaultTo(150))
    .addColumn('retrieval_depth', 'integer', (c) => c.notNull().defaultTo(5))
    .addColumn('language', 'text', (c) => c.notNull().defaultTo('en'))
    .addColumn('system_prompt', 'text')
    .addColumn('embedding', 'jsonb', (c) => c.notNull())
    .addColumn('embedding_api_key_enc', 'text')
    .addColumn('serving_embedding', 'jsonb', (c) => c.notNull())
    .addColumn('serving_embedding_api_key_enc', 'text')
    .addColumn('llm', 'jsonb')
    .addColumn('llm_api_key_enc', 'text')
    .addColumn('memory_enabled', 'boolean', (c) => c.notNull().defaultTo(true))
    .addColumn('memory_max_messages', 'integer', (c) => c.notNull().defaultTo(10))
    .addColumn('tools', 'jsonb', (c) => c.notNull().defaultTo(sql`'[]'::jsonb`))
    .addColumn('embedding_version', 'integer', (c) => c.notNull().defaultTo(1))
    .addColumn('serving_version', 'integer', (c) => c.notNull().defaultTo(1))
    .addColumn('content_version', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema.createIndex('kb_configs_owner_idx').on('kb_configs').column('owner_id').execute();

  await db.schema
    .createTable('kb_documents')
    .addColumn('id', 'uuid', (c) => c.primaryKey())
    .addColumn('owner_id', 'uuid', (c) => c.notNull().references('owners.id').onDelete('cascade'))
    .addColumn('config_id', 'uuid', (c) => c.notNull().references('kb_configs.id').onDelete('cascade'))
    .addColumn('file_name', 'text', (c) => c.notNull())
    .addColumn('kind', 'text', (c) => c.notNull())
    .addColumn('size_bytes', 'bigint', (c) => c.notNull())
    .addColumn('content_hash', 'text', (c) => c.notNull())
    .addColumn('blob_key', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull().check(sql`status in ('processing','completed','failed')`))
    .addColumn('stage', 'text', (c) => c.notNull())
    .addColumn('error', 'text')
    .addColumn('page_count', 'integer')
    .addColumn('chunk_count', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addUniqueConstraint('kb_documents_content_unique', ['config_id', 'content_hash'])
    .execute();
  await db.schema.createIndex('kb_documents_config_idx').on('kb_documents').column('config_id').execute();

  await db.schema
    .createTable('kb_chunks')
    .addColumn('id', 'uuid', (c) => c.primaryKey())
    .addColumn('document_id', 'uuid', (c) => c.notNull().references('kb_documents.id').onDelete('cascade'))
    .addColumn('config_id', 'uuid', (c) => c.notNull().references('kb_configs.id').onDelete('cascade'))
    .addColumn('chunk_index', 'integer', (c) => c.notNull())
    .addColumn('page', 'integer')
    .addColumn('text', 'text', (c) => c.notNull())
    .addColumn('term_count', 'integer', (c) => c.notNull())
    .addColumn('token_count', 'integer', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('kb_chunks_config_idx').on('kb_chunks').columns(['config_id', 'document_id']).execute();

  // Lexical index: one row per (chunk, stemmed term). BM25 is computed from these in SQL.
  await db.schema
    .createTable('kb_postings')
    .addColumn('config_id', 'uuid', (c) => c.notNull())
    .addColumn('term', 'text', (c) => c.notNull())
    .addColumn('chunk_id', 'uuid', (c) => c.notNull().references('kb_chunks.id').onDelete('cascade'))
    .addColumn('tf', 'integer', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('kb_postings_lookup_idx').on('kb_postings').columns(['config_id', 'term']).execute();
  await db.schema.createIndex('kb_postings_chunk_idx').on('kb_postings').column('chunk_id').execute();

  // Vectors, per embedding version so a model change can re-embed while the old version keeps serving.
  await db.schema
    .createTable('kb_vectors')
    .addColumn('chunk_id', 'uuid', (c) => c.notNull().references('kb_chunks.id').onDelete('cascade'))
    .addColumn('config_id', 'uuid', (c) => c.notNull())
    .addColumn('version', 'integer', (c) => c.notNull())
    .addColumn('embedding', sql`real[]`, (c) => c.notNull())
    .addPrimaryKeyConstraint('kb_vectors_pk', ['chunk_id', 'version'])
    .execute();
  await db.schema.createIndex('kb_vectors_config_idx').on('kb_vectors').columns(['config_id', 'version']).execute();

  const { rows } = await sql<{ available: boolean }>`select exists (select 1 from pg_available_extensions where name = 'vector') as available`.execute(db);
  if (rows[0]?.available) {
    // pgvector where the server has it (PGlite does): a vector copy of the array for SQL-side similarity.
    await sql`create extension if not exists vector`.execute(db);
    await sql`alter table kb_vectors add column vec vector`.execute(db);
  }
}

export async function down(db: Kysely<any>) {
  for (const table of ['kb_vectors', 'kb_postings', 'kb_chunks', 'kb_documents', 'kb_configs', 'jobs']) {
    await db.schema.dropTable(table).ifExists().execute();
  }
}
