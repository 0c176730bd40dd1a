import { describe, expect, it } from 'vitest';
import { AppError } from '../../schema/errors.ts';
import { validateLeadFields } from './form.ts';

const form = {
  name: 'lead_capture',
  enabled: true,
  config: {
    fields: [
      { name: 'name', label: 'Name', type: 'text', required: true },
      { name: 'email', label: 'Email', type: 'email', required: true },
      { name: 'phone', label: 'Phone', type: 'tel', required: false },
      { name: 'note', label: 'Note', type: 'textarea', required: false },
    ],
  },
};

function refusal(run: () => unknown): AppError {
  try {
    run();
  } catch (error) {
    if (error instanceof AppError) return error;
    throw error;
  }
  throw new Error('expected a refusal');
}

describe('validateLeadFields', () => {
  it('keeps the form fields in order, trimmed, without empty optional ones', () => {
    expect(validateLeadFields([form], { email: ' ada@example.com ', name: 'Ada', phone: '  ', note: 'Call after 5' })).toEqual({
      name: 'Ada',
      email: 'ada@example.com',
      note: 'Call after 5',
    });
    expect(validateLeadFields([form], { name: 'Ada', email: 'a@b.co', phone: '+44 (20) 7946-0000' }).phone).toBe('+44 (20) 7946-0000');
  });

  it('is forbidden when the interface has no enabled lead-capture form', () => {
    expect(refusal(() => validateLeadFields([], { name: 'Ada' })).code).toBe('FORBIDDEN');
    expect(refusal(() => validateLeadFields([{ ...form, enabled: false }], { name: 'Ada' })).code).toBe('FORBIDDEN');
  });

  it('names the field it refuses', () => {
    const cases: Array<[Record<string, string>, string]> = [
      [{ name: 'Ada', email: 'ada@example.com', company: 'x' }, 'fields.company: not a field of this form'],
      [{ email: 'ada@example.com' }, 'fields.name: required'],
      [{ name: 'Ada', email: 'not an address' }, 'fields.email: must be an e-mail address'],
      [{ name: 'Ada', email: 'ada@example.com', phone: 'call me' }, 'fields.phone: must be a phone number'],
      [{ name: 'A'.repeat(201), email: 'ada@example.com' }, 'fields.name: at most 200 characters'],
    ];
    for (const [fields, details] of cases) {
      const error = refusal(() => validateLeadFields([form], fields));
      expect(error.code).toBe('VALIDATION_FAILED');
      expect(error.details).toBe(details);
    }
  });

  it('reads only submitted values: fields named after Object.prototype members are missing when not sent', () => {
    const prototypeNames = {
      ...form,
      config: {
        fields: [
          { name: 'email', label: 'Email', type: 'email', required: true },
          { name: 'constructor', label: 'Company', type: 'text', required: false },
          { name: 'toString', label: 'Role', type: 'text', required: false },
          { name: 'hasOwnProperty', label: 'Team', type: 'text', required: false },
          { name: 'valueOf', label: 'Budget', type: 'text', required: true },
        ],
      },
    };
    expect(refusal(() => validateLeadFields([prototypeNames], { email: 'ada@example.com' })).details).toBe('fields.valueOf: required');
    expect(validateLeadFields([prototypeNames], { email: 'ada@example.com', valueOf: '10k' })).toEqual({ email: 'ada@example.com', valueOf: '10k' });
    expect(validateLeadFields([prototypeNames], { email: 'ada@example.com', constructor: 'ACME', hasOwnProperty: 'Ops', valueOf: '10k' })).toEqual({
      email: 'ada@example.com',
      constructor: 'ACME',
      hasOwnProperty: 'Ops',
      valueOf: '10k',
    });
  });
});
