import { sql, type Kysely } from 'kysely';

/**
 * Tool integrations: owners' OAuth client registrations (auth configs), connected accounts with their tokens
 * (sealed with the service's key), and the single-use `state` of authorizations in flight (stored hashed).
 * `refresh_lease_until` is the refresh lock: one holder per account at a time, across instances, without
 * keeping a transaction open during the call to the provider.
 */
export async function up(db: Kysely<any>) {
  await db.schema
    .createTable('toolhub_auth_configs')
    .addColumn('id', 'uuid', (c) => c.primaryKey())
    .addColumn('owner_id', 'uuid', (c) => c.notNull().references('owners.id').onDelete('cascade'))
    .addColumn('toolkit', 'text', (c) => c.notNull())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('client_id', 'text', (c) => c.notNull())
    .addColumn('client_secret_enc', 'text', (c) => c.notNull())
    .addColumn('scopes', 'jsonb', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`date_trunc('milliseconds', now())`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema.createIndex('toolhub_auth_configs_owner_idx').on('toolhub_auth_configs').columns(['owner_id', 'created_at']).execute();
  await db.schema
    .createTable('toolhub_accounts')
    .addColumn('id', 'uuid', (c) => c.primaryKey())
    .addColumn('owner_id', 'uuid', (c) => c.notNull().references('owners.id').onDelete('cascade'))
    .addColumn('toolkit', 'text', (c) => c.notNull())
    .addColumn('auth_config_id', 'text')
    .addColumn('label', 'text')
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('status_reason', 'text')
    .addColumn('settings', 'jsonb', (c) => c.notNull())
    .addColumn('access_token_enc', 'text')
    .addColumn('refresh_token_enc', 'text')
    .addColumn('token_expires_at', 'timestamptz')
    .addColumn('scopes', 'jsonb', (c) => c.notNull())
    .addColumn('identity', 'text')
    .addColumn('refresh_lease_until', 'timestamptz')
    .addColumn('last_refresh_at', 'timestamptz')
    .addColumn('last_error', 'text')
    .addColumn('last_used_at', 'timestamptz')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`date_trunc('milliseconds', now())`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema.createIndex('toolhub_accounts_owner_idx').on('toolhub_accounts').columns(['owner_id', 'created_at']).execute();
  await db.schema
    .createTable('toolhub_oauth_states')
    .addColumn('state_hash', 'text', (c) => c.primaryKey())
    .addColumn('owner_id', 'uuid', (c) => c.notNull().references('owners.id').onDelete('cascade'))
    .addColumn('account_id', 'uuid', (c) => c.notNull().references('toolhub_accounts.id').onDelete('cascade'))
    .addColumn('code_verifier_enc', 'text', (c) => c.notNull())
    .addColumn('redirect_uri', 'text', (c) => c.notNull())
    .addColumn('expires_at', 'timestamptz', (c) => c.notNull())
    .addColumn('used_at', 'timestamptz')
    .execute();
  // Which connected accounts' tools a knowledge base's model may call.
  await db.schema
    .createTable('toolhub_enabled_tools')
    .addColumn('config_id', 'uuid', (c) => c.notNull().references('kb_configs.id').onDelete('cascade'))
    .addColumn('account_id', 'uuid', (c) => c.notNull().references('toolhub_accounts.id').onDelete('cascade'))
    .addColumn('tool', 'text', (c) => c.notNull())
    .addColumn('owner_id', 'uuid', (c) => c.notNull().references('owners.id').onDelete('cascade'))
    .addPrimaryKeyConstraint('toolhub_enabled_tools_pkey', ['config_id', 'account_id', 'tool'])
    .execute();
}

export async function down(db: Kysely<any>) {
  for (const table of ['toolhub_enabled_tools', 'toolhub_oauth_states', 'toolhub_accounts', 'toolhub_auth_configs'])
    await db.schema.dropTable(table).ifExists().execute();
}
