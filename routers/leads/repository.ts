import { randomUUID } from 'node:crypto';
import { sql, type Kysely, type Transaction } from 'kysely';
import type { DB } from '../../db/types.ts';
import { jsonb } from '../../db/json.ts';
import { toIso } from '../../schema/common.ts';
import { countActivity } from '../dashboard/repository.ts';

type Db = Kysely<DB> | Transaction<DB>;

/** Stores a lead and counts it in the owner's dashboard, in the caller's transaction. */
export async function insertLead(
  db: Db,
  lead: { ownerId: string; chatInterfaceId: string; visitorId: string | null; sessionId: string | null; fields: Record<string, string> },
) {
  const row = await db
    .insertInto('leads')
    .values({
      id: randomUUID(),
      owner_id: lead.ownerId,
      chat_interface_id: lead.chatInterfaceId,
      visitor_id: lead.visitorId,
      session_id: lead.sessionId,
      fields: jsonb(lead.fields),
    })
    .returningAll()
    .executeTakeFirstOrThrow();
  await countActivity(db, lead.ownerId, lead.chatInterfaceId, { metrics: { leads: 1 } });
  return row;
}

/** The owner's leads, newest first, one more than `limit` (to tell whether a next page exists). */
export function listLeads(db: Db, ownerId: string, page: { limit: number; chatInterfaceId?: string; after?: { createdAt: string; id: string } }) {
  let query = db.selectFrom('leads').selectAll().where('owner_id', '=', ownerId);
  if (page.chatInterfaceId) query = query.where('chat_interface_id', '=', page.chatInterfaceId);
  if (page.after) query = query.where(sql<boolean>`(created_at, id) < (${new Date(page.after.createdAt)}::timestamptz, ${page.after.id}::uuid)`);
  return query
    .orderBy('created_at', 'desc')
    .orderBy('id', 'desc')
    .limit(page.limit + 1)
    .execute();
}

export function toLead(row: {
  id: string;
  chat_interface_id: string;
  session_id: string | null;
  visitor_id: string | null;
  fields: unknown;
  created_at: Date;
}) {
  return {
    id: row.id,
    chatInterfaceId: row.chat_interface_id,
    sessionId: row.session_id,
    visitorId: row.visitor_id,
    fields: row.fields as Record<string, string>,
    createdAt: toIso(row.created_at)!,
  };
}
