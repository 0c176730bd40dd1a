import type { AppDeps } from '../context.ts';
import { DAY_MS, freeSlotsOf, toAvailability } from './booking-service.ts';
import * as repo from './repository.ts';
import { localIso } from './slots.ts';

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
  const slots = (await freeSlotsOf(deps, iface.id, availability, { from: now, to: new Date(now.getTime() + days * DAY_MS) })).slice(0, count);
  return {
    durationMinutes: availability.slotMinutes,
    timeZone: availability.timeZone,
    slots: slots.map((s) => ({ start: s.start.toISOString(), end: s.end.toISOString(), localStart: localIso(s.start, availability.timeZone) })),
    book,
  };
}
