import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<any>) {
  await db.schema
    .createTable('owners')
    .addColumn('id', 'uuid', (c) => c.primaryKey())
    .addColumn('email', 'text', (c) => c.notNull().unique())
    .addColumn('name', 'text')
    .addColumn('password_hash', 'text')
    .addColumn('oidc_subject', 'text', (c) => c.unique())
    .addColumn('plan', 'text', (c) => c.notNull().defaultTo('free').check(sql`plan in ('free','premium','enterprise')`))
    .addColumn('role', 'text', (c) => c.notNull().defaultTo('owner').check(sql`role in ('owner','admin')`))
    .addColumn('tour_completed_at', 'timestamptz')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();

  await db.schema
    .createTable('sessions')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('owner_id', 'uuid', (c) => c.notNull().references('owners.id').onDelete('cascade'))
    .addColumn('expires_at', 'timestamptz', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('sessions_owner_idx').on('sessions').column('owner_id').execute();

  await db.schema
    .createTable('chat_interfaces')
    .addColumn('id', 'uuid', (c) => c.primaryKey())
    .addColumn('owner_id', 'uuid', (c) => c.notNull().references('owners.id').onDelete('cascade'))
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('slug', 'text', (c) => c.notNull().unique())
    .addColumn('config_id', 'text')
    .addColumn('endpoint_url', 'text')
    .addColumn('endpoint_type', 'text')
    .addColumn('endpoint_api_key_enc', 'text')
    .addColumn('welcome_message', 'text')
    .addColumn('primary_color', 'text')
    .addColumn('placeholder', 'text')
    .addColumn('avatar_webp', 'bytea')
    .addColumn('avatar_version', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema.createIndex('chat_interfaces_owner_idx').on('chat_interfaces').column('owner_id').execute();

  await db.schema
    .createTable('api_keys')
    .addColumn('id', 'uuid', (c) => c.primaryKey())
    .addColumn('owner_id', 'uuid', (c) => c.notNull().references('owners.id').onDelete('cascade'))
    .addColumn('chat_interface_id', 'uuid', (c) => c.notNull().references('chat_interfaces.id').onDelete('cascade'))
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('key_hash', 'text', (c) => c.notNull().unique())
    .addColumn('key_prefix', 'text', (c) => c.notNull())
    .addColumn('active', 'boolean', (c) => c.notNull().defaultTo(true))
    .addColumn('last_used_at', 'timestamptz')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema.createIndex('api_keys_owner_idx').on('api_keys').column('owner_id').execute();

  await db.schema
    .createTable('query_cache')
    .addColumn('owner_id', 'uuid', (c) => c.primaryKey().references('owners.id').onDelete('cascade'))
    .addColumn('data', 'jsonb', (c) => c.notNull())
    .addColumn('size_bytes', 'integer', (c) => c.notNull())
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
}

export async function down(db: Kysely<any>) {
  for (const table of ['query_cache', 'api_keys', 'chat_interfaces', 'sessions', 'owners']) {
    await db.schema.dropTable(table).ifExists().execute();
  }
}
