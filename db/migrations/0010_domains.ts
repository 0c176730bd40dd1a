import { sql, type Kysely } from 'kysely';

/**
 * Custom domains. Several owners may add the same hostname, but only one can hold it past pending_verification:
 * the partial unique index is the claim rule, and proving DNS control is the only way to take it over.
 */
export async function up(db: Kysely<any>) {
  await db.schema
    .createTable('domains')
    .addColumn('id', 'uuid', (c) => c.primaryKey())
    .addColumn('owner_id', 'uuid', (c) => c.notNull().references('owners.id').onDelete('cascade'))
    .addColumn('hostname', 'text', (c) => c.notNull())
    .addColumn('chat_interface_id', 'uuid', (c) => c.references('chat_interfaces.id').onDelete('set null'))
    .addColumn('status', 'text', (c) => c.notNull().defaultTo('pending_verification'))
    .addColumn('status_reason', 'text')
    .addColumn('verification_token', 'text', (c) => c.notNull())
    .addColumn('verified_at', 'timestamptz')
    .addColumn('activated_at', 'timestamptz')
    .addColumn('last_dns', 'jsonb')
    .addColumn('dns_checked_at', 'timestamptz')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addUniqueConstraint('domains_owner_hostname_key', ['owner_id', 'hostname'])
    .execute();
  await sql`create unique index domains_claimed_hostname_idx on domains (hostname) where status <> 'pending_verification'`.execute(db);
  await db.schema.createIndex('domains_owner_idx').on('domains').columns(['owner_id', 'created_at']).execute();
}

export async function down(db: Kysely<any>) {
  await db.schema.dropTable('domains').ifExists().execute();
}
