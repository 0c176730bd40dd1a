import type { Kysely, Selectable, Transaction } from 'kysely';
import type { DB, SupportTicketsTable, TicketPriority, TicketStatus } from '../../db/types.ts';
import { jsonb } from '../../db/json.ts';

type Db = Kysely<DB> | Transaction<DB>;
export type TicketRow = Selectable<SupportTicketsTable>;

export async function insertTicket(
  trx: Transaction<DB>,
  ticket: Omit<TicketRow, 'created_at' | 'updated_at' | 'transcript' | 'assignee' | 'requester_confirmed_at'> & { transcript: unknown },
  message: { id: string; body: string },
) {
  const row = await trx
    .insertInto('support_tickets')
    .values({ ...ticket, transcript: ticket.transcript === null ? null : jsonb(ticket.transcript) })
    .returningAll()
    .executeTakeFirstOrThrow();
  await trx.insertInto('support_messages').values({ id: message.id, ticket_id: row.id, author: 'requester', author_id: null, body: message.body }).execute();
  return row;
}

/** The tickets a caller may see: those addressed to them, or every ticket for an admin. */
export function visibleTickets(db: Db, viewer: { ownerId: string; admin: boolean }) {
  let query = db.selectFrom('support_tickets');
  if (!viewer.admin) query = query.where('owner_id', '=', viewer.ownerId);
  return query;
}

export async function listTickets(
  db: Db,
  viewer: { ownerId: string; admin: boolean },
  filter: { status?: TicketStatus; limit: number; after?: { createdAt: string; id: string } },
) {
  let query = visibleTickets(db, viewer).selectAll();
  if (filter.status) query = query.where('status', '=', filter.status);
  if (filter.after) {
    const { createdAt, id } = filter.after;
    query = query.where((eb) => eb.or([eb('created_at', '<', new Date(createdAt)), eb.and([eb('created_at', '=', new Date(createdAt)), eb('id', '<', id)])]));
  }
  return query
    .orderBy('created_at', 'desc')
    .orderBy('id', 'desc')
    .limit(filter.limit + 1)
    .execute();
}

export const findTicket = (db: Db, viewer: { ownerId: string; admin: boolean }, id: string) =>
  visibleTickets(db, viewer).selectAll().where('id', '=', id).executeTakeFirst();

/**
 * The same ticket, locked until the transaction ends: a change checks its transition against this row, so two
 * changes of one ticket take turns and the second sees the status the first left.
 */
export const lockTicket = (trx: Transaction<DB>, viewer: { ownerId: string; admin: boolean }, id: string) =>
  visibleTickets(trx, viewer).selectAll().where('id', '=', id).forUpdate().executeTakeFirst();

export const listMessages = (db: Db, ticketId: string) =>
  db.selectFrom('support_messages').selectAll().where('ticket_id', '=', ticketId).orderBy('created_at').orderBy('id').execute();

export async function updateTicket(
  trx: Transaction<DB>,
  id: string,
  changes: { status?: TicketStatus; priority?: TicketPriority; assignee?: string | null },
  reply?: { id: string; author: 'owner' | 'admin'; authorId: string; body: string },
) {
  const row = await trx
    .updateTable('support_tickets')
    .set({ ...changes, updated_at: new Date() })
    .where('id', '=', id)
    .returningAll()
    .executeTakeFirstOrThrow();
  if (reply) {
    await trx
      .insertInto('support_messages')
      .values({ id: reply.id, ticket_id: id, author: reply.author, author_id: reply.authorId, body: reply.body })
      .execute();
  }
  return row;
}

/**
 * Marks the requester of the ticket with this confirmation token as proven, once: answers the ticket and whether
 * this call confirmed it (a second click confirms nothing again), or undefined for no such ticket. Locked, so two
 * clicks at once mail the waiting replies once.
 */
export async function confirmRequester(trx: Transaction<DB>, tokenHash: string, at: Date) {
  const ticket = await trx.selectFrom('support_tickets').selectAll().where('confirm_token_hash', '=', tokenHash).forUpdate().executeTakeFirst();
  if (!ticket || ticket.requester_confirmed_at) return ticket && { ticket, confirmedNow: false };
  const confirmed = await trx
    .updateTable('support_tickets')
    .set({ requester_confirmed_at: at, updated_at: at })
    .where('id', '=', ticket.id)
    .returningAll()
    .executeTakeFirstOrThrow();
  return { ticket: confirmed, confirmedNow: true };
}

/** Where notifications for tickets without an owner go: the admins' addresses. */
export const adminEmails = async (db: Db) =>
  (await db.selectFrom('owners').select('email').where('role', '=', 'admin').orderBy('created_at').limit(20).execute()).map((r) => r.email);
