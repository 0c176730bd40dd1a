import type { KbToolSetting } from '../../db/types.ts';

export interface ToolCall {
  name: string;
  arguments: Record<string, unknown>;
}

// Phrases that ask to be contacted: the lead-capture tool answers them with a form.
const CONTACT_INTENT =
  /\b(contact|call me|email me|e-mail me|reach me|get in touch|talk to (a |an )?(human|person|agent|sales|someone)|speak (to|with) (a |an )?(human|person|agent|someone)|sales team|quote|pricing offer|demo|callback|call back|leave my (details|number|email))\b/i;

const BOOKING_INTENT = /\b(book|booking|appointment|schedule|reserve|reservation|meeting|slot)\b/i;
const SLOTS_OFFERED = 6;
const OPENING_HOUR = 9;
const CLOSING_HOUR = 17;

/** Local wall-clock parts of an instant in a time zone (Intl does the zone arithmetic). */
function zonedParts(instant: Date, timeZone: string) {
  const parts = Object.fromEntries(
    new Intl.DateTimeFormat('en-US', { timeZone, hourCycle: 'h23', weekday: 'short', hour: '2-digit', minute: '2-digit' })
      .formatToParts(instant)
      .map((p) => [p.type, p.value]),
  );
  return { weekday: parts.weekday as string, hour: Number(parts.hour), minute: Number(parts.minute) };
}

/**
 * The next free slots within opening hours (weekdays 9:00-17:00 in the tool's time zone), on a grid of the
 * slot length, from the next full hour on. The widget offers them; confirming one creates the booking.
 */
export function proposeSlots(now: Date, config: { durationMinutes?: unknown; timezone?: unknown; daysAhead?: unknown }) {
  const duration = Number(config.durationMinutes ?? 30);
  const timeZone = typeof config.timezone === 'string' ? config.timezone : 'UTC';
  const horizon = now.getTime() + Number(config.daysAhead ?? 14) * 24 * 3600_000;
  const slots: Array<{ start: string; end: string }> = [];
  let cursor = Math.ceil(now.getTime() / 3600_000) * 3600_000;
  while (slots.length < SLOTS_OFFERED && cursor < horizon) {
    const local = zonedParts(new Date(cursor), timeZone);
    const startMinutes = local.hour * 60 + local.minute;
    const weekday = local.weekday !== 'Sat' && local.weekday !== 'Sun';
    if (weekday && startMinutes >= OPENING_HOUR * 60 && startMinutes + duration <= CLOSING_HOUR * 60) {
      slots.push({ start: new Date(cursor).toISOString(), end: new Date(cursor + duration * 60_000).toISOString() });
    }
    cursor += duration * 60_000;
  }
  return { durationMinutes: duration, timezone: timeZone, slots };
}

/**
 * Decides which of a knowledge base's enabled tools the visitor's message calls: lead capture yields the
 * form the widget shows; booking yields the next free slots to choose from.
 */
export function selectToolCalls(
  message: string,
  tools: KbToolSetting[],
  now = new Date(),
): { toolCalls: ToolCall[]; formConfig: Record<string, unknown> | null } {
  const lead = tools.find((t) => t.name === 'lead_capture' && t.enabled);
  if (lead && CONTACT_INTENT.test(message)) {
    return {
      toolCalls: [{ name: 'lead_capture', arguments: { reason: 'the visitor asked to be contacted' } }],
      formConfig: { tool: 'lead_capture', ...(lead.config ?? {}) },
    };
  }
  const booking = tools.find((t) => t.name === 'book_slot' && t.enabled);
  if (booking && BOOKING_INTENT.test(message)) {
    return { toolCalls: [{ name: 'book_slot', arguments: proposeSlots(now, booking.config ?? {}) }], formConfig: null };
  }
  return { toolCalls: [], formConfig: null };
}
