import { type Kysely, type Selectable, sql, type Transaction } from 'kysely';
import { countActivity } from '../dashboard/repository.ts';
import type { BookingAvailabilityTable, BookingsTable, DB } from '../../db/types.ts';
import { jsonb } from '../../db/json.ts';

type Db = Kysely<DB> | Transaction<DB>;
export type BookingRow = Selectable<BookingsTable>;
export type AvailabilityRow = Selectable<BookingAvailabilityTable>;

export const findAvailability = (db: Db, chatInterfaceId: string) =>
  db.selectFrom('booking_availability').selectAll().where('chat_interface_id', '=', chatInterfaceId).executeTakeFirst();

export async function saveAvailability(db: Db, row: Omit<AvailabilityRow, 'updated_at' | 'weekly' | 'overrides'> & { weekly: unknown; overrides: unknown }) {
  const values = { ...row, weekly: jsonb(row.weekly), overrides: jsonb(row.overrides) };
  const { chat_interface_id: _key, ...changes } = values;
  return db
    .insertInto('booking_availability')
    .values(values)
    .onConflict((oc) => oc.column('chat_interface_id').doUpdateSet({ ...changes, updated_at: new Date() }))
    .returningAll()
    .executeTakeFirstOrThrow();
}

/**
 * Serialises every booking change of one chat interface until the transaction ends, on PostgreSQL across
 * instances too: the checks that the exclusion constraint cannot express (buffers, the day cap) see a stable set.
 */
export async function lockInterfaceBookings(trx: Transaction<DB>, chatInterfaceId: string) {
  await sql`select pg_advisory_xact_lock(hashtextextended(${`bookings:${chatInterfaceId}`}, 0))`.execute(trx);
}

/** Confirmed, exclusive bookings of an interface that end after `from` and start before `to` (what blocks slots). */
export const busyBetween = (db: Db, chatInterfaceId: string, from: Date, to: Date) =>
  db
    .selectFrom('bookings')
    .select(['start_at', 'end_at'])
    .where('chat_interface_id', '=', chatInterfaceId)
    .where('status', '=', 'confirmed')
    .where('exclusive', '=', true)
    .where('end_at', '>', from)
    .where('start_at', '<', to)
    .orderBy('start_at')
    .execute();

/** Stores a booking and counts it in the owner's dashboard, in the caller's transaction. */
export async function insertBooking(
  db: Db,
  row: Omit<BookingRow, 'sequence' | 'created_at' | 'updated_at' | 'cancelled_at' | 'cancel_reason' | 'cancelled_by'>,
) {
  const inserted = await db.insertInto('bookings').values(row).returningAll().executeTakeFirstOrThrow();
  await countActivity(db, row.owner_id, row.chat_interface_id, { metrics: { bookings: 1 } });
  return inserted;
}

/** A visitor's confirmed bookings of an interface that have not started (what the per-visitor cap counts). */
export async function countLiveVisitorBookings(db: Db, chatInterfaceId: string, visitorId: string, now: Date) {
  const row = await db
    .selectFrom('bookings')
    .select((eb) => eb.fn.countAll<string>().as('n'))
    .where('chat_interface_id', '=', chatInterfaceId)
    .where('visitor_id', '=', visitorId)
    .where('status', '=', 'confirmed')
    .where('start_at', '>', now)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

/** Visitors' bookings of an interface made since `since`, cancelled ones included (their mails went), oldest first. */
export const chatBookingTimesSince = (db: Db, chatInterfaceId: string, since: Date) =>
  db
    .selectFrom('bookings')
    .select('created_at')
    .where('chat_interface_id', '=', chatInterfaceId)
    .where('source', '=', 'chat')
    .where('created_at', '>', since)
    .orderBy('created_at')
    .execute();

/**
 * An interface's confirmed bookings that have not ended (what deleting the interface cancels first), by the
 * database's now(): the very rule of the trigger that refuses the delete (migration 0024), within one transaction,
 * so no booking can fall between the two clocks.
 */
export const upcomingBookingIds = async (db: Db, ownerId: string, chatInterfaceId: string) =>
  (
    await db
      .selectFrom('bookings')
      .select('id')
      .where('owner_id', '=', ownerId)
      .where('chat_interface_id', '=', chatInterfaceId)
      .where('status', '=', 'confirmed')
      .where('end_at', '>', sql<Date>`now()`)
      .orderBy('start_at')
      .execute()
  ).map((r) => r.id);

export const findOwnedBooking = (db: Db, ownerId: string, id: string) =>
  db.selectFrom('bookings').selectAll().where('id', '=', id).where('owner_id', '=', ownerId).executeTakeFirst();

export const findBooking = (db: Db, id: string) => db.selectFrom('bookings').selectAll().where('id', '=', id).executeTakeFirst();

export const findBookingByCancelToken = (db: Db, tokenHash: string) =>
  db.selectFrom('bookings').selectAll().where('cancel_token_hash', '=', tokenHash).executeTakeFirst();

/** Cancels a confirmed booking; undefined when it was already cancelled (the caller answers idempotently). */
export const cancelBooking = (db: Db, id: string, change: { reason: string | null; by: 'owner' | 'attendee' }) =>
  db
    .updateTable('bookings')
    .set({
      status: 'cancelled',
      cancel_reason: change.reason,
      cancelled_by: change.by,
      cancelled_at: new Date(),
      sequence: sql`sequence + 1`,
      updated_at: new Date(),
    })
    .where('id', '=', id)
    .where('status', '=', 'confirmed')
    .returningAll()
    .executeTakeFirst();

export interface BookingFilter {
  chatInterfaceId?: string;
  status?: 'confirmed' | 'cancelled';
  from?: Date;
  to?: Date;
  limit: number;
  offset: number;
}

export async function listBookings(db: Db, ownerId: string, filter: BookingFilter) {
  let query = db.selectFrom('bookings').where('owner_id', '=', ownerId);
  if (filter.chatInterfaceId) query = query.where('chat_interface_id', '=', filter.chatInterfaceId);
  if (filter.status) query = query.where('status', '=', filter.status);
  if (filter.from) query = query.where('end_at', '>', filter.from);
  if (filter.to) query = query.where('start_at', '<', filter.to);
  const [rows, total] = await Promise.all([
    query.selectAll().orderBy('start_at').orderBy('id').limit(filter.limit).offset(filter.offset).execute(),
    query.select((eb) => eb.fn.countAll<string>().as('n')).executeTakeFirstOrThrow(),
  ]);
  return { rows, total: Number(total.n) };
}
