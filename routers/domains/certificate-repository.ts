import type { Kysely, Selectable, Transaction } from 'kysely';
import type { DB, DomainCertificatesTable } from '../../db/types.ts';

type Db = Kysely<DB> | Transaction<DB>;
export type CertificateRow = Selectable<DomainCertificatesTable>;

export const findCertificate = (db: Db, domainId: string) =>
  db.selectFrom('domain_certificates').selectAll().where('domain_id', '=', domainId).executeTakeFirst();

/** The issued certificate the listener should present for a hostname (only while its domain is active). */
export const findServableCertificate = (db: Db, hostname: string) =>
  db
    .selectFrom('domain_certificates')
    .innerJoin('domains', 'domains.id', 'domain_certificates.domain_id')
    .select(['domain_certificates.cert_pem', 'domain_certificates.key_enc', 'domain_certificates.not_after'])
    .where('domain_certificates.hostname', '=', hostname)
    .where('domains.status', '=', 'active')
    .where('domain_certificates.cert_pem', 'is not', null)
    .executeTakeFirst();

export async function saveCertificateState(
  db: Db,
  domainId: string,
  hostname: string,
  state: Partial<Pick<CertificateRow, 'reason' | 'cert_pem' | 'key_enc' | 'not_before' | 'not_after' | 'issuer'>> & { status: CertificateRow['status'] },
) {
  return db
    .insertInto('domain_certificates')
    .values({ domain_id: domainId, hostname, ...state })
    .onConflict((oc) => oc.column('domain_id').doUpdateSet({ hostname, ...state, updated_at: new Date() }))
    .returningAll()
    .executeTakeFirstOrThrow();
}

export const putChallenge = (db: Db, token: string, keyAuthorization: string) =>
  db
    .insertInto('acme_challenges')
    .values({ token, key_authorization: keyAuthorization })
    .onConflict((oc) => oc.column('token').doUpdateSet({ key_authorization: keyAuthorization }))
    .execute();

export const findChallenge = async (db: Db, token: string) =>
  (await db.selectFrom('acme_challenges').select('key_authorization').where('token', '=', token).executeTakeFirst())?.key_authorization;

export const deleteChallenge = (db: Db, token: string) => db.deleteFrom('acme_challenges').where('token', '=', token).execute();

export const findAcmeAccount = (db: Db, directoryUrl: string) =>
  db.selectFrom('acme_accounts').selectAll().where('directory_url', '=', directoryUrl).executeTakeFirst();

/** Keeps the first account key stored for a directory: two instances racing register one account. */
export async function saveAcmeAccount(db: Db, directoryUrl: string, keyEnc: string) {
  await db
    .insertInto('acme_accounts')
    .values({ directory_url: directoryUrl, key_enc: keyEnc, account_url: null })
    .onConflict((oc) => oc.column('directory_url').doNothing())
    .execute();
  return (await findAcmeAccount(db, directoryUrl))!;
}

export const saveAcmeAccountUrl = (db: Db, directoryUrl: string, accountUrl: string) =>
  db.updateTable('acme_accounts').set({ account_url: accountUrl }).where('directory_url', '=', directoryUrl).execute();
