import { describe, expect, it } from 'vitest';
import { selectToolCalls } from './tools.ts';

const lead = {
  name: 'lead_capture',
  enabled: true,
  config: { title: 'Leave your details', fields: [{ name: 'email', label: 'Email', type: 'email', required: true }] },
};
const booking = { name: 'book_slot', enabled: true, config: { slotsOffered: 4, daysAhead: 14 } };

describe('tool selection', () => {
  it('lead capture on a contact request yields the form', () => {
    const result = selectToolCalls('Could your sales team call me back?', [lead, booking]);
    expect(result.toolCalls.map((t) => t.name)).toEqual(['lead_capture']);
    expect(result.formConfig).toMatchObject({ tool: 'lead_capture', title: 'Leave your details' });
  });

  it('booking intent calls book_slot with its settings (the turn adds the free slots); disabled tools and plain questions yield nothing', () => {
    const result = selectToolCalls('I would like to book an appointment', [booking]);
    expect(result.formConfig).toEqual({});
    expect(result.toolCalls).toEqual([{ name: 'book_slot', arguments: { slotsOffered: 4, daysAhead: 14 } }]);
    expect(selectToolCalls('book a table', [{ ...booking, enabled: false }]).toolCalls).toEqual([]);
    expect(selectToolCalls('What is your return policy?', [lead, booking]).toolCalls).toEqual([]);
  });
});
