import { sql, type CompiledQuery, type Kysely } from 'kysely';
import type { ApiKeyRow, DB } from '../../db/types.ts';
import { toIso } from '../../schema/common.ts';

// lastUsedAt is written at most once a minute per key so a busy key does not turn every read into a write.
const LAST_USED_GRANULARITY_MS = 60_000;

/** What an API key shows its owner (the hash and the owner are never part of it). */
const KEY_COLUMNS = ['id', 'name', 'chat_interface_id', 'key_prefix', 'active', 'last_used_at', 'created_at', 'updated_at'] as const;
type KeyView = Pick<ApiKeyRow, (typeof KEY_COLUMNS)[number]>;

export type ApiKey = ReturnType<typeof toApiKey>;

export function toApiKey(row: KeyView) {
  return {
    id: row.id,
    name: row.name,
    chatInterfaceId: row.chat_interface_id,
    prefix: row.key_prefix,
    active: row.active,
    lastUsedAt: toIso(row.last_used_at),
    createdAt: toIso(row.created_at)!,
    updatedAt: toIso(row.updated_at)!,
  };
}

/** The active key with the chat interface it is bound to (one query: the chat path needs both). */
export async function findActiveKeyByHash(db: Kysely<DB>, keyHash: string) {
  const { rows } = await sql<ActiveKey>`select * from find_active_api_key(${keyHash})`.execute(db);
  return rows[0];
}

/** Whose a refused key is, when its row still exists (a deactivated key): only asked on the refusal path. */
export function findKeyOwnerByHash(db: Kysely<DB>, keyHash: string) {
  return db.selectFrom('api_keys').select(['owner_id', 'chat_interface_id']).where('key_hash', '=', keyHash).executeTakeFirst();
}

export interface ActiveKey {
  id: string;
  owner_id: string;
  chat_interface_id: string;
  last_used_at: Date | null;
  slug: string;
  config_id: string | null;
  endpoint_url: string | null;
  endpoint_type: string | null;
  endpoint_api_key_enc: string | null;
}

/** Writes last_used_at when the known value is older than a minute; returns the new value when it did. */
export async function touchKeyLastUsed(db: Kysely<DB>, id: string, lastUsedAt: Date | null): Promise<Date | undefined> {
  const now = new Date();
  if (lastUsedAt && now.getTime() - new Date(lastUsedAt).getTime() < LAST_USED_GRANULARITY_MS) return undefined;
  await db.updateTable('api_keys').set({ last_used_at: now }).where('id', '=', id).execute();
  return now;
}

/**
 * The key list is the hottest owner read: its statement is built and compiled once per database handle, then run with
 * the owner as its only parameter (Kysely's building and compiling took 10-15 µs of CPU a request).
 */
const listStatements = new WeakMap<Kysely<DB>, CompiledQuery<KeyView>>();

export async function listKeys(db: Kysely<DB>, ownerId: string): Promise<KeyView[]> {
  let statement = listStatements.get(db);
  if (!statement) {
    statement = db.selectFrom('api_keys').select(KEY_COLUMNS).where('owner_id', '=', ownerId).orderBy('created_at', 'desc').orderBy('id').compile();
    listStatements.set(db, statement);
  }
  const { rows } = await db.executeQuery<KeyView>({ ...statement, parameters: [ownerId] });
  return rows;
}

export function findKey(db: Kysely<DB>, ownerId: string, id: string) {
  return db.selectFrom('api_keys').selectAll().where('owner_id', '=', ownerId).where('id', '=', id).executeTakeFirst();
}

export function insertKey(
  db: Kysely<DB>,
  row: { id: string; owner_id: string; chat_interface_id: string; name: string; key_hash: string; key_prefix: string },
) {
  return db.insertInto('api_keys').values(row).returningAll().executeTakeFirstOrThrow();
}

export function updateKey(db: Kysely<DB>, ownerId: string, id: string, changes: { name?: string; active?: boolean }) {
  return db
    .updateTable('api_keys')
    .set({ ...changes, updated_at: new Date() })
    .where('owner_id', '=', ownerId)
    .where('id', '=', id)
    .returningAll()
    .executeTakeFirst();
}

/** Deactivates every key of the owner (kept, so the owner can see and reactivate them). */
export async function deactivateOwnerKeys(db: Kysely<DB>, ownerId: string): Promise<void> {
  await db.updateTable('api_keys').set({ active: false, updated_at: new Date() }).where('owner_id', '=', ownerId).where('active', '=', true).execute();
}

export async function deleteKey(db: Kysely<DB>, ownerId: string, id: string) {
  const result = await db.deleteFrom('api_keys').where('owner_id', '=', ownerId).where('id', '=', id).executeTakeFirst();
  return Number(result.numDeletedRows) > 0;
}
