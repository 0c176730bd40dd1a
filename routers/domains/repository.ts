import { type Kysely, type Selectable, sql, type Transaction } from 'kysely';
import type { DB, DomainsTable } from '../../db/types.ts';
import { jsonb } from '../../db/json.ts';

type Db = Kysely<DB> | Transaction<DB>;
export type DomainRow = Selectable<DomainsTable>;
export type DomainStatus = DomainRow['status'];

export const listDomains = (db: Db, ownerId: string) =>
  db.selectFrom('domains').selectAll().where('owner_id', '=', ownerId).orderBy('created_at', 'desc').orderBy('id').execute();

export const countDomains = async (db: Db, ownerId: string) =>
  Number(
    (
      await db
        .selectFrom('domains')
        .select((eb) => eb.fn.countAll<number>().as('n'))
        .where('owner_id', '=', ownerId)
        .executeTakeFirstOrThrow()
    ).n,
  );

export const findDomain = (db: Db, ownerId: string, id: string) =>
  db.selectFrom('domains').selectAll().where('owner_id', '=', ownerId).where('id', '=', id).executeTakeFirst();

export const findDomainForUpdate = (trx: Transaction<DB>, ownerId: string, id: string) =>
  trx.selectFrom('domains').selectAll().where('owner_id', '=', ownerId).where('id', '=', id).forUpdate().executeTakeFirst();

/** The record that holds the hostname past pending_verification (at most one, by the partial unique index). */
export const findClaim = (db: Db, hostname: string) =>
  db.selectFrom('domains').selectAll().where('hostname', '=', hostname).where('status', '<>', 'pending_verification').executeTakeFirst();

/** Whether any record, pending ones included, names the hostname. */
export const isHostnameAdded = async (db: Db, hostname: string) =>
  (await db.selectFrom('domains').select('id').where('hostname', '=', hostname).limit(1).executeTakeFirst()) !== undefined;

/**
 * Serialises the additions of one owner's domains until the transaction ends, on PostgreSQL across instances too:
 * the count that bounds them must not be read by two additions at once.
 */
export async function lockOwnerDomains(trx: Transaction<DB>, ownerId: string) {
  await sql`select pg_advisory_xact_lock(hashtextextended(${`domains:${ownerId}`}, 0))`.execute(trx);
}

export const insertDomain = (
  db: Db,
  row: { id: string; owner_id: string; hostname: string; chat_interface_id: string; verification_token: string; status_reason: string },
) => db.insertInto('domains').values(row).returningAll().executeTakeFirstOrThrow();

export const updateDomain = (
  db: Db,
  id: string,
  changes: Partial<Pick<DomainRow, 'chat_interface_id' | 'status' | 'status_reason' | 'verified_at' | 'activated_at' | 'dns_checked_at'>> & {
    last_dns?: object;
  },
) => {
  const { last_dns, ...rest } = changes;
  return db
    .updateTable('domains')
    .set({ ...rest, ...(last_dns !== undefined ? { last_dns: jsonb(last_dns) } : {}), updated_at: new Date() })
    .where('id', '=', id)
    .returningAll()
    .executeTakeFirstOrThrow();
};

/** Another owner proved control of the hostname: whoever held it goes back to pending, saying why. */
/**
 * Serialises claims of one hostname across owners and instances until the transaction ends: two verifications of
 * it at once otherwise both found no holder, and the second write broke the one-holder unique index (a 500).
 */
export async function lockHostname(trx: Transaction<DB>, hostname: string) {
  await sql`select pg_advisory_xact_lock(hashtextextended(${`domain-host:${hostname}`}, 0))`.execute(trx);
}

export const releaseClaim = (trx: Transaction<DB>, hostname: string, exceptId: string, reason: string) =>
  trx
    .updateTable('domains')
    .set({ status: 'pending_verification', status_reason: reason, verified_at: null, activated_at: null, updated_at: new Date() })
    .where('hostname', '=', hostname)
    .where('id', '<>', exceptId)
    .where('status', '<>', 'pending_verification')
    .returningAll()
    .execute();

export const deleteDomain = async (db: Db, ownerId: string, id: string) =>
  (await db.deleteFrom('domains').where('owner_id', '=', ownerId).where('id', '=', id).returningAll().executeTakeFirst()) ?? undefined;

export async function listAllDomains(db: Db, filter: { status?: DomainStatus }, page: { limit: number; offset: number }) {
  let query = db.selectFrom('domains');
  if (filter.status) query = query.where('status', '=', filter.status);
  const [rows, total] = await Promise.all([
    query.selectAll().orderBy('created_at', 'desc').orderBy('id').limit(page.limit).offset(page.offset).execute(),
    query.select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow(),
  ]);
  return { rows, total: Number(total.n) };
}

export const findDomainByIdForUpdate = (trx: Transaction<DB>, id: string) =>
  trx.selectFrom('domains').selectAll().where('id', '=', id).forUpdate().executeTakeFirst();

export const findDomainById = (db: Db, id: string) => db.selectFrom('domains').selectAll().where('id', '=', id).executeTakeFirst();

/** Ids of every owner's domains (for the admin bulk re-checks): pending ones, verified ones (any later state), or all. */
export const allDomainIds = async (db: Db, options: { only: 'pending' | 'verified' | 'all' }) => {
  let query = db.selectFrom('domains').select('id');
  if (options.only === 'pending') query = query.where('status', '=', 'pending_verification');
  if (options.only === 'verified') query = query.where('status', '<>', 'pending_verification');
  return (await query.execute()).map((r) => r.id);
};

export const listActiveDomains = (db: Db) => db.selectFrom('domains').selectAll().where('status', '=', 'active').execute();
