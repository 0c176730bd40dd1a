import type { Kysely, Updateable } from 'kysely';
import type { ChatInterfaceRow, ChatInterfacesTable, DB } from '../../db/types.ts';

// Every read names the owner: another owner's interface is indistinguishable from a missing one.
const columns = [
  'id',
  'owner_id',
  'name',
  'slug',
  'config_id',
  'endpoint_url',
  'endpoint_type',
  'endpoint_api_key_enc',
  'welcome_message',
  'primary_color',
  'placeholder',
  'avatar_version',
  'public',
  'allowed_origins',
  'created_at',
  'updated_at',
] as const;
export type ChatInterfaceRecord = Omit<ChatInterfaceRow, 'avatar_webp'>;

export function listOwnedInterfaces(db: Kysely<DB>, ownerId: string): Promise<ChatInterfaceRecord[]> {
  return db.selectFrom('chat_interfaces').select(columns).where('owner_id', '=', ownerId).orderBy('created_at', 'desc').orderBy('id').execute();
}

export function findOwnedInterface(db: Kysely<DB>, ownerId: string, id: string): Promise<ChatInterfaceRecord | undefined> {
  return db.selectFrom('chat_interfaces').select(columns).where('owner_id', '=', ownerId).where('id', '=', id).executeTakeFirst();
}

export function insertInterface(db: Kysely<DB>, row: Omit<ChatInterfaceRow, 'avatar_webp' | 'avatar_version' | 'created_at' | 'updated_at'>) {
  return db.insertInto('chat_interfaces').values(row).returning(columns).executeTakeFirstOrThrow();
}

export function updateInterface(db: Kysely<DB>, ownerId: string, id: string, changes: Updateable<ChatInterfacesTable>) {
  return db
    .updateTable('chat_interfaces')
    .set({ ...changes, updated_at: new Date() })
    .where('owner_id', '=', ownerId)
    .where('id', '=', id)
    .returning(columns)
    .executeTakeFirst();
}

/** Takes every interface of the owner off its public page and widget (visitor access reads `public` on each call). */
export async function unpublishOwnerInterfaces(db: Kysely<DB>, ownerId: string): Promise<void> {
  await db.updateTable('chat_interfaces').set({ public: false, updated_at: new Date() }).where('owner_id', '=', ownerId).where('public', '=', true).execute();
}

/**
 * The owner's interfaces that answered from a knowledge base being deleted go back to having none: `config_id` has no
 * foreign key (it also holds legacy ids), so nothing else would clear it.
 */
export function detachConfig(db: Kysely<DB>, ownerId: string, configId: string): Promise<ChatInterfaceRecord[]> {
  return (
    db
      .updateTable('chat_interfaces')
      .set({ config_id: null, updated_at: new Date() })
      .where('owner_id', '=', ownerId)
      // Rows saved before ids were stored in their canonical form may hold one in capitals.
      .where((eb) => eb(eb.fn('lower', ['config_id']), '=', configId))
      .returning(columns)
      .execute()
  );
}

export async function deleteInterface(db: Kysely<DB>, ownerId: string, id: string) {
  const result = await db.deleteFrom('chat_interfaces').where('owner_id', '=', ownerId).where('id', '=', id).executeTakeFirst();
  return Number(result.numDeletedRows) > 0;
}

/** Stores a new avatar and bumps its version (the URL changes, so caches refetch); false when there is no such interface. */
export async function replaceAvatar(db: Kysely<DB>, ownerId: string, id: string, webp: Uint8Array): Promise<boolean> {
  const row = await db
    .updateTable('chat_interfaces')
    .set((eb) => ({ avatar_webp: webp, avatar_version: eb('avatar_version', '+', 1), updated_at: new Date() }))
    .where('owner_id', '=', ownerId)
    .where('id', '=', id)
    .returning(['id'])
    .executeTakeFirst();
  return row !== undefined;
}

export function findAvatar(db: Kysely<DB>, id: string) {
  return db.selectFrom('chat_interfaces').select(['avatar_webp', 'avatar_version']).where('id', '=', id).executeTakeFirst();
}

export async function countKeysByInterface(db: Kysely<DB>, ownerId: string) {
  const rows = await db
    .selectFrom('api_keys')
    .select(['chat_interface_id'])
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('owner_id', '=', ownerId)
    .groupBy('chat_interface_id')
    .execute();
  return new Map(rows.map((r) => [r.chat_interface_id, Number(r.n)]));
}
