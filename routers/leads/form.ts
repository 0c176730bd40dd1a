import type { KbToolSetting } from '../../db/types.ts';
import { AppError } from '../../schema/errors.ts';

interface FormField {
  name: string;
  label: string;
  type: 'text' | 'email' | 'tel' | 'textarea';
  required: boolean;
}

// The HTML living standard's "valid e-mail address", the rule the browser's own type=email check applies.
const EMAIL = /^[a-zA-Z0-9.!#$%&'*+/=?^_`{|}~-]+@[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?)*$/;
const PHONE = /^\+?[0-9 ().\-/]{3,40}$/;
const SHORT_FIELD_MAX = 200;

const invalid = (details: string) => new AppError('VALIDATION_FAILED', 'Invalid request parameters', details);

/**
 * The submitted value of a field, own properties only: owners may name a field after an Object.prototype member
 * (constructor, toString, valueOf), and a plain lookup of one the visitor left out finds the inherited function.
 */
const submittedValue = (submitted: Record<string, string>, name: string) => (Object.hasOwn(submitted, name) ? submitted[name] : undefined);

/**
 * Checks a submitted lead against the lead-capture form the owner configured (the same formConfig the widget
 * rendered): only the form's fields, required ones present, e-mail and phone values well-formed. Returns the
 * values to store, in the form's field order, empty optional fields left out.
 */
export function validateLeadFields(tools: readonly KbToolSetting[], submitted: Record<string, string>): Record<string, string> {
  const tool = tools.find((t) => t.name === 'lead_capture' && t.enabled);
  if (!tool) throw new AppError('FORBIDDEN', 'This chat interface does not collect contact details');
  const fields = (tool.config?.fields ?? []) as FormField[];
  const known = new Set(fields.map((f) => f.name));
  for (const name of Object.keys(submitted)) if (!known.has(name)) throw invalid(`fields.${name}: not a field of this form`);
  const values: Record<string, string> = {};
  for (const field of fields) {
    const value = (submittedValue(submitted, field.name) ?? '').trim();
    if (value === '') {
      if (field.required) throw invalid(`fields.${field.name}: required`);
      continue;
    }
    if (field.type !== 'textarea' && value.length > SHORT_FIELD_MAX) throw invalid(`fields.${field.name}: at most ${SHORT_FIELD_MAX} characters`);
    if (field.type === 'email' && !EMAIL.test(value)) throw invalid(`fields.${field.name}: must be an e-mail address`);
    if (field.type === 'tel' && !PHONE.test(value)) throw invalid(`fields.${field.name}: must be a phone number`);
    values[field.name] = value;
  }
  if (Object.keys(values).length === 0) throw invalid('fields: the form is empty');
  return values;
}
