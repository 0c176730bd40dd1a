import { randomUUID } from 'node:crypto';
import { sql, type Kysely } from 'kysely';
import type { DB } from '../../db/types.ts';

/** A public interface by slug, with what the page shows and what framing allows. Private ones are not found. */
export const findPublicInterface = (db: Kysely<DB>, slug: string) =>
  db
    .selectFrom('chat_interfaces')
    .select(['id', 'owner_id', 'slug', 'name', 'config_id', 'welcome_message', 'placeholder', 'primary_color', 'avatar_version', 'allowed_origins'])
    .where('slug', '=', slug)
    .where('public', '=', true)
    .executeTakeFirst();

export type PublicInterfaceRow = NonNullable<Awaited<ReturnType<typeof findPublicInterface>>>;

export async function insertVisitor(db: Kysely<DB>, visitor: { chatInterfaceId: string; ownerId: string; resumeHash: string }) {
  const id = randomUUID();
  await db
    .insertInto('visitors')
    .values({ id, chat_interface_id: visitor.chatInterfaceId, owner_id: visitor.ownerId, resume_hash: visitor.resumeHash })
    .execute();
  return id;
}

/**
 * The visitor holding this resume token, if it belongs to this interface and was seen within `idleDays`; marks it
 * seen. A resume token is a long-lived secret kept in a browser: one left unused that long no longer opens anything.
 */
export const resumeVisitor = (db: Kysely<DB>, chatInterfaceId: string, resumeHash: string, idleDays: number) =>
  db
    .updateTable('visitors')
    .set({ last_seen_at: sql`now()` })
    .where('resume_hash', '=', resumeHash)
    .where('chat_interface_id', '=', chatInterfaceId)
    .where('last_seen_at', '>', sql<Date>`now() - make_interval(days => ${idleDays})`)
    .returning(['id'])
    .executeTakeFirst();

/** The visitor's conversations, newest first, with the first words of each one's last message. */
export const listVisitorSessions = (db: Kysely<DB>, visitorId: string, chatInterfaceId: string, limit: number) =>
  db
    .selectFrom('chat_sessions as s')
    .select(['s.id', 's.created_at', 's.last_message_at'])
    .select((eb) =>
      eb
        .selectFrom('chat_messages as m')
        .select(sql<string>`left(m.content, 120)`.as('preview'))
        .whereRef('m.session_id', '=', 's.id')
        .orderBy('m.seq', 'desc')
        .limit(1)
        .as('preview'),
    )
    .where('s.visitor_id', '=', visitorId)
    .where('s.chat_interface_id', '=', chatInterfaceId)
    .orderBy('s.last_message_at', 'desc')
    .limit(limit)
    .execute();

/** A public interface by id (a custom domain names its interface by id). */
export const findPublicInterfaceById = (db: Kysely<DB>, id: string) =>
  db
    .selectFrom('chat_interfaces')
    .select(['id', 'owner_id', 'slug', 'name', 'allowed_origins'])
    .where('id', '=', id)
    .where('public', '=', true)
    .executeTakeFirst();
