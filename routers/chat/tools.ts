import type { KbToolSetting } from '../../db/types.ts';

export interface ToolCall {
  name: string;
  arguments: Record<string, unknown>;
}

// Phrases that ask to be contacted: the lead-capture tool answers them with a form.
const CONTACT_INTENT =
  /\b(contact|call me|email me|e-mail me|reach me|get in touch|talk to (a |an )?(human|person|agent|sales|someone)|speak (to|with) (a |an )?(human|person|agent|someone)|sales team|quote|pricing offer|demo|callback|call back|leave my (details|number|email))\b/i;

const BOOKING_INTENT = /\b(book|booking|appointment|schedule|reserve|reservation|meeting|slot)\b/i;
/**
 * Decides which of a knowledge base's enabled tools the visitor's message calls: lead capture yields the
 * form the widget shows; booking yields the next free slots to choose from.
 */
export function selectToolCalls(message: string, tools: KbToolSetting[]): { toolCalls: ToolCall[]; formConfig: Record<string, unknown> } {
  const lead = tools.find((t) => t.name === 'lead_capture' && t.enabled);
  if (lead && CONTACT_INTENT.test(message)) {
    return {
      toolCalls: [{ name: 'lead_capture', arguments: { reason: 'the visitor asked to be contacted' } }],
      formConfig: { tool: 'lead_capture', ...(lead.config ?? {}) },
    };
  }
  const booking = tools.find((t) => t.name === 'book_slot' && t.enabled);
  if (booking && BOOKING_INTENT.test(message)) {
    // Its arguments (the free slots) are filled in by the turn, which reads the interface's booking hours.
    return { toolCalls: [{ name: 'book_slot', arguments: { ...(booking.config ?? {}) } }], formConfig: {} };
  }
  return { toolCalls: [], formConfig: {} };
}
