import type { Kysely } from 'kysely';
import type { DB, OwnerRow } from '../../db/types.ts';
import { toIso } from '../../schema/common.ts';
import { deactivateOwnerKeys } from '../api-keys/repository.ts';
import { unpublishOwnerInterfaces } from '../chat-interfaces/repository.ts';
import { disableOwnerEndpoints } from '../webhooks/repository.ts';

export const toOwner = (row: Pick<OwnerRow, 'id' | 'email' | 'name' | 'plan' | 'role'>) => ({
  id: row.id,
  email: row.email,
  name: row.name,
  plan: row.plan,
  role: row.role,
});

export const toOwnerDetail = (row: OwnerRow) => ({
  ...toOwner(row),
  tourCompletedAt: toIso(row.tour_completed_at),
  createdAt: toIso(row.created_at)!,
});

export function findOwnerByEmail(db: Kysely<DB>, email: string) {
  return db.selectFrom('owners').selectAll().where('email', '=', email).executeTakeFirst();
}

export function findOwnerById(db: Kysely<DB>, id: string) {
  return db.selectFrom('owners').selectAll().where('id', '=', id).executeTakeFirst();
}

export function insertOwner(db: Kysely<DB>, row: Pick<OwnerRow, 'id' | 'email' | 'name' | 'password_hash' | 'role'>) {
  return db
    .insertInto('owners')
    .values({ ...row, oidc_subject: null, plan: 'free', tour_completed_at: null })
    .returningAll()
    .executeTakeFirstOrThrow();
}

/** Newest first; `total` counts every owner the filters match. */
export async function listOwners(db: Kysely<DB>, filter: { plan?: OwnerRow['plan']; role?: OwnerRow['role'] }, page: { limit: number; offset: number }) {
  let query = db.selectFrom('owners');
  if (filter.plan) query = query.where('plan', '=', filter.plan);
  if (filter.role) query = query.where('role', '=', filter.role);
  const [rows, total] = await Promise.all([
    query.selectAll().orderBy('created_at', 'desc').orderBy('id').limit(page.limit).offset(page.offset).execute(),
    query.select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow(),
  ]);
  return { rows, total: Number(total.n) };
}

export function updateOwnerPlanAndRole(db: Kysely<DB>, id: string, changes: Partial<Pick<OwnerRow, 'plan' | 'role'>>) {
  return db
    .updateTable('owners')
    .set({ plan: changes.plan, role: changes.role, updated_at: new Date() })
    .where('id', '=', id)
    .returningAll()
    .executeTakeFirst();
}

/** Keeps the first completion time: repeating the call changes nothing. */
export function markTourCompleted(db: Kysely<DB>, id: string) {
  return db
    .updateTable('owners')
    .set((eb) => ({ tour_completed_at: eb.fn.coalesce('tour_completed_at', eb.val(new Date())) }))
    .where('id', '=', id)
    .returning(['tour_completed_at'])
    .executeTakeFirstOrThrow();
}

export function findOwnerByOidcSubject(db: Kysely<DB>, subject: string) {
  return db.selectFrom('owners').selectAll().where('oidc_subject', '=', subject).executeTakeFirst();
}

export function insertOidcOwner(db: Kysely<DB>, row: Pick<OwnerRow, 'id' | 'email' | 'name' | 'oidc_subject' | 'role'>) {
  return db
    .insertInto('owners')
    .values({
      id: row.id,
      email: row.email,
      name: row.name,
      password_hash: null,
      oidc_subject: row.oidc_subject,
      plan: 'free',
      role: row.role,
      tour_completed_at: null,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
}

/**
 * Links a password account to the provider subject whose verified email it carries. Sign-up never verified
 * that email, so whoever created the account may not be its owner: its password and sessions are dropped,
 * and from now on the account is reached through the provider. What that creator set up must not keep working
 * for them either, so it waits for the verified owner's review: API keys are deactivated, webhook endpoints
 * disabled (`account_linked`) and interfaces taken off their public pages; nothing is deleted.
 */
export function linkOidcSubject(db: Kysely<DB>, ownerId: string, subject: string) {
  return db.transaction().execute(async (trx) => {
    const linked = await trx
      .updateTable('owners')
      .set({ oidc_subject: subject, password_hash: null, updated_at: new Date() })
      .where('id', '=', ownerId)
      .where('oidc_subject', 'is', null)
      .returningAll()
      .executeTakeFirst();
    if (linked) {
      await trx.deleteFrom('sessions').where('owner_id', '=', ownerId).execute();
      await deactivateOwnerKeys(trx, ownerId);
      await disableOwnerEndpoints(trx, ownerId, new Date());
      await unpublishOwnerInterfaces(trx, ownerId);
    }
    return linked;
  });
}
