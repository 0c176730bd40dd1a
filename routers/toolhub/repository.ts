import { type Kysely, type Selectable, sql, type Transaction, type Updateable } from 'kysely';
import type { DB, ToolhubAccountsTable, ToolhubAuthConfigsTable } from '../../db/types.ts';
import { jsonb } from '../../db/json.ts';

type Db = Kysely<DB> | Transaction<DB>;
export type AuthConfigRow = Selectable<ToolhubAuthConfigsTable>;
export type AccountRow = Selectable<ToolhubAccountsTable>;

export const listAuthConfigs = (db: Db, ownerId: string) =>
  db.selectFrom('toolhub_auth_configs').selectAll().where('owner_id', '=', ownerId).orderBy('created_at').orderBy('id').execute();

export const findAuthConfig = (db: Db, ownerId: string, id: string) =>
  db.selectFrom('toolhub_auth_configs').selectAll().where('owner_id', '=', ownerId).where('id', '=', id).executeTakeFirst();

export const insertAuthConfig = (db: Db, row: Omit<AuthConfigRow, 'created_at' | 'updated_at' | 'scopes'> & { scopes: string[] }) =>
  db
    .insertInto('toolhub_auth_configs')
    .values({ ...row, scopes: jsonb(row.scopes) })
    .returningAll()
    .executeTakeFirstOrThrow();

export const updateAuthConfig = (
  db: Db,
  ownerId: string,
  id: string,
  changes: { name?: string; client_id?: string; client_secret_enc?: string; scopes?: string[] },
) =>
  db
    .updateTable('toolhub_auth_configs')
    .set({ ...changes, ...(changes.scopes ? { scopes: jsonb(changes.scopes) } : {}), updated_at: new Date() })
    .where('owner_id', '=', ownerId)
    .where('id', '=', id)
    .returningAll()
    .executeTakeFirst();

export const deleteAuthConfig = (db: Db, ownerId: string, id: string) =>
  db.deleteFrom('toolhub_auth_configs').where('owner_id', '=', ownerId).where('id', '=', id).executeTakeFirst();

export const listAccounts = (db: Db, ownerId: string) =>
  db.selectFrom('toolhub_accounts').selectAll().where('owner_id', '=', ownerId).orderBy('created_at').orderBy('id').execute();

export const findAccount = (db: Db, ownerId: string, id: string) =>
  db.selectFrom('toolhub_accounts').selectAll().where('owner_id', '=', ownerId).where('id', '=', id).executeTakeFirst();

export const findAccountById = (db: Db, id: string) => db.selectFrom('toolhub_accounts').selectAll().where('id', '=', id).executeTakeFirst();

export const insertAccount = (
  db: Db,
  row: Pick<AccountRow, 'id' | 'owner_id' | 'toolkit' | 'auth_config_id' | 'label' | 'status' | 'status_reason'> &
    Partial<Pick<AccountRow, 'access_token_enc' | 'identity'>> & { settings: Record<string, unknown>; scopes: string[] },
) =>
  db
    .insertInto('toolhub_accounts')
    .values({ ...row, settings: jsonb(row.settings), scopes: jsonb(row.scopes) })
    .returningAll()
    .executeTakeFirstOrThrow();

type AccountChanges = Omit<Updateable<ToolhubAccountsTable>, 'scopes' | 'settings' | 'id' | 'owner_id'> & { scopes?: string[] };

export const updateAccount = (db: Db, id: string, changes: AccountChanges) =>
  db
    .updateTable('toolhub_accounts')
    .set({ ...changes, ...(changes.scopes ? { scopes: jsonb(changes.scopes) } : {}), updated_at: new Date() })
    .where('id', '=', id)
    .returningAll()
    .executeTakeFirst();

/**
 * Takes the account's refresh lease when nobody holds it (or the holder's lease ran out after a crash).
 * Undefined: another request is refreshing right now.
 */
export const takeRefreshLease = (db: Db, id: string, leaseMs: number) =>
  db
    .updateTable('toolhub_accounts')
    .set({ refresh_lease_until: sql`now() + make_interval(secs => ${leaseMs / 1000})` })
    .where('id', '=', id)
    .where((eb) => eb.or([eb('refresh_lease_until', 'is', null), eb('refresh_lease_until', '<', sql<Date>`now()`)]))
    .returningAll()
    .executeTakeFirst();

export const insertState = (
  db: Db,
  row: { state_hash: string; owner_id: string; account_id: string; code_verifier_enc: string; redirect_uri: string; expires_at: Date },
) => db.insertInto('toolhub_oauth_states').values(row).execute();

/** Uses a state once: only an unused, unexpired state is returned, and it is marked used in the same statement. */
export const consumeState = (db: Db, stateHash: string) =>
  db
    .updateTable('toolhub_oauth_states')
    .set({ used_at: new Date() })
    .where('state_hash', '=', stateHash)
    .where('used_at', 'is', null)
    .where('expires_at', '>', new Date())
    .returningAll()
    .executeTakeFirst();

/** States older than a day are of no use to anyone (they expire after minutes). */
export const purgeStates = (db: Db) => db.deleteFrom('toolhub_oauth_states').where('expires_at', '<', sql<Date>`now() - interval '1 day'`).execute();

export const listEnabledTools = (db: Db, ownerId: string, configId?: string) => {
  let query = db
    .selectFrom('toolhub_enabled_tools')
    .innerJoin('toolhub_accounts', 'toolhub_accounts.id', 'toolhub_enabled_tools.account_id')
    .select([
      'toolhub_enabled_tools.config_id',
      'toolhub_enabled_tools.account_id',
      'toolhub_enabled_tools.tool',
      'toolhub_accounts.toolkit',
      'toolhub_accounts.status',
    ])
    .where('toolhub_enabled_tools.owner_id', '=', ownerId);
  if (configId) query = query.where('toolhub_enabled_tools.config_id', '=', configId);
  return query.orderBy('toolhub_accounts.toolkit').orderBy('toolhub_enabled_tools.tool').orderBy('toolhub_enabled_tools.account_id').execute();
};

/** Replaces a knowledge base's enabled tools in one transaction. */
export async function replaceEnabledTools(trx: Transaction<DB>, ownerId: string, configId: string, tools: Array<{ accountId: string; tool: string }>) {
  await trx.deleteFrom('toolhub_enabled_tools').where('owner_id', '=', ownerId).where('config_id', '=', configId).execute();
  if (tools.length === 0) return;
  await trx
    .insertInto('toolhub_enabled_tools')
    .values(tools.map((t) => ({ config_id: configId, account_id: t.accountId, tool: t.tool, owner_id: ownerId })))
    .onConflict((oc) => oc.doNothing())
    .execute();
}

export const touchAccount = (db: Db, id: string) => db.updateTable('toolhub_accounts').set({ last_used_at: new Date() }).where('id', '=', id).execute();
