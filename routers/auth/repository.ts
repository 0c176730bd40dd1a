import type { Kysely } from 'kysely';
import type { DB, OwnerRow } from '../../db/types.ts';
import { toIso } from '../../schema/common.ts';

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
