import { describe, expect, it } from 'vitest';
import { proposeSlots, selectToolCalls } from './tools.ts';

const lead = {
  name: 'lead_capture',
  enabled: true,
  config: { title: 'Leave your details', fields: [{ name: 'email', label: 'Email', type: 'email', required: true }] },
};
const booking = { name: 'book_slot', enabled: true, config: { durationMinutes: 30, timezone: 'Europe/Berlin', daysAhead: 14 } };

describe('tool selection', () => {
  it('lead capture on a contact request yields the form', () => {
    const result = selectToolCalls('Could your sales team call me back?', [lead, booking]);
    expect(result.toolCalls.map((t) => t.name)).toEqual(['lead_capture']);
    expect(result.formConfig).toMatchObject({ tool: 'lead_capture', title: 'Leave your details' });
  });

  it('booking intent yields slots; disabled tools and plain questions yield nothing', () => {
    const now = new Date('2026-11-20T14:10:00Z'); // Friday 15:10 in Berlin
    const result = selectToolCalls('I would like to book an appointment', [booking], now);
    expect(result.formConfig).toBeNull();
    const args = result.toolCalls[0]!.arguments as { slots: Array<{ start: string; end: string }> };
    // From the next full hour (16:00 Berlin): 16:00 and 16:30 on Friday, then Monday from 9:00.
    expect(args.slots[0]).toEqual({ start: '2026-11-20T15:00:00.000Z', end: '2026-11-20T15:30:00.000Z' });
    expect(args.slots[1]).toEqual({ start: '2026-11-20T15:30:00.000Z', end: '2026-11-20T16:00:00.000Z' });
    expect(args.slots[2]).toEqual({ start: '2026-11-23T08:00:00.000Z', end: '2026-11-23T08:30:00.000Z' });
    expect(args.slots).toHaveLength(6);
    expect(selectToolCalls('book a table', [{ ...booking, enabled: false }]).toolCalls).toEqual([]);
    expect(selectToolCalls('What is your return policy?', [lead, booking]).toolCalls).toEqual([]);
  });

  it('proposes nothing beyond the horizon', () => {
    expect(proposeSlots(new Date('2026-11-21T10:00:00Z'), { durationMinutes: 60, timezone: 'UTC', daysAhead: 1 }).slots).toEqual([]);
  });
});
