import type { AppDeps } from '../context.ts';
import { toAvailability } from './booking-service.ts';
import * as repo from './repository.ts';
import { freeSlots, localIso } from './slots.ts';

const DAY_MS = 24 * 3600_000;

/**
 * The arguments of a `book_slot` tool call in chat: the next free slots of the interface's booking hours (in UTC,
 * with the owner's local time), and the visitor operation that books one of them.
 */
export async function offerSlots(
  deps: Pick<AppDeps, 'database'>,
  iface: { id: string; slug: string },
  settings: { slotsOffered?: unknown; daysAhead?: unknown },
) {
  const book = { method: 'POST', path: `/api/v1/chat/${iface.slug}/bookings` };
  const row = await repo.findAvailability(deps.database.db, iface.id);
  if (!row) return { slots: [], durationMinutes: null, timeZone: null, book, reason: 'No booking hours are set for this chat yet' };
  const availability = toAvailability(row);
  const now = new Date();
  const days = Math.min(Math.max(Number(settings.daysAhead ?? 14) || 14, 1), 62);
  const count = Math.min(Math.max(Number(settings.slotsOffered ?? 6) || 6, 1), 20);
  const to = new Date(now.getTime() + days * DAY_MS);
  const busy = await repo.busyBetween(deps.database.db, iface.id, new Date(now.getTime() - 2 * DAY_MS), new Date(to.getTime() + 2 * DAY_MS));
  const slots = freeSlots(
    availability,
    busy.map((b) => ({ start: b.start_at, end: b.end_at })),
    { from: now, to },
    now,
  ).slice(0, count);
  return {
    durationMinutes: availability.slotMinutes,
    timeZone: availability.timeZone,
    slots: slots.map((s) => ({ start: s.start.toISOString(), end: s.end.toISOString(), localStart: localIso(s.start, availability.timeZone) })),
    book,
  };
}
