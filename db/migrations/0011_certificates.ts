import { sql, type Kysely } from 'kysely';

/**
 * Certificates for custom domains, obtained over ACME. Private keys are stored sealed with the service's
 * encryption key, so every instance serves every domain. Pending HTTP-01 challenges live here too: whichever
 * instance the CA reaches answers them.
 */
export async function up(db: Kysely<any>) {
  await db.schema
    .createTable('domain_certificates')
    .addColumn('domain_id', 'uuid', (c) => c.primaryKey().references('domains.id').onDelete('cascade'))
    .addColumn('hostname', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('reason', 'text')
    .addColumn('cert_pem', 'text')
    .addColumn('key_enc', 'text')
    .addColumn('not_before', 'timestamptz')
    .addColumn('not_after', 'timestamptz')
    .addColumn('issuer', 'text')
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema.createIndex('domain_certificates_hostname_idx').on('domain_certificates').column('hostname').execute();
  await db.schema
    .createTable('acme_challenges')
    .addColumn('token', 'text', (c) => c.primaryKey())
    .addColumn('key_authorization', 'text', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema
    .createTable('acme_accounts')
    .addColumn('directory_url', 'text', (c) => c.primaryKey())
    .addColumn('key_enc', 'text', (c) => c.notNull())
    .addColumn('account_url', 'text')
    .execute();
}

export async function down(db: Kysely<any>) {
  for (const table of ['acme_accounts', 'acme_challenges', 'domain_certificates']) await db.schema.dropTable(table).ifExists().execute();
}
