import { z } from 'zod';

export const isUuid = (value: string) => /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(value);
/** Never assigned: our ids are random (version 4) UUIDs. */
const NO_SUCH_ID = '00000000-0000-0000-0000-000000000000';
/**
 * The id to look up. Ids are opaque strings to clients and ours are UUIDs: one that is not a UUID names nothing,
 * so it is looked up as an id that exists nowhere and the procedure answers its usual 404 (never a 400, never a
 * database cast error), without a guard of its own.
 */
export const lookupId = (value: string) => (isUuid(value) ? value.toLowerCase() : NO_SUCH_ID);
/** Whether lookupId found the id malformed: for a procedure that answers 404 before validating the rest of its input. */
export const namesNothing = (id: string) => id === NO_SUCH_ID;
/** A resource id as given (path, query or body), before lookupId. */
export const idText = z.string().min(1).max(100);
/** A resource id to look up (see lookupId); documented as the string the client sends. */
export const idParam = idText.transform(lookupId);
export const timestamp = z.string().meta({ format: 'date-time', example: '2026-01-01T12:00:00.000Z' });

/** What an HTTP header value may hold (RFC 9110 field-value: Node's http throws on anything else). */
export const HEADER_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;
/**
 * A credential we send to an upstream in a header: refused when saved if a header cannot carry it, rather than
 * saved and then failing every call with an error that blames the connection.
 */
export const headerCredential = (max: number) =>
  z.string().min(1).max(max).regex(HEADER_VALUE, 'must hold only characters an HTTP header can carry (no control characters, nothing past U+00FF)');

/** C0 control characters (CR, LF, tab, NUL, ...) and DEL. */
export const CONTROL_CHARACTER = /[\u0000-\u001f\u007f]/;
/**
 * A name or a subject: one line of text, trimmed. These reach mail headers (a Subject, a calendar invitation's
 * display names), where a line break ends the header and starts another, so one is refused (400 naming the field)
 * rather than rewritten, as unstorable text is (schema/text-input.ts).
 */
export const singleLineText = (max: number) =>
  z
    .string()
    .trim()
    .min(1)
    .max(max)
    .refine((text) => !CONTROL_CHARACTER.test(text), 'must be a single line: no line breaks, tabs or other control characters');
export const toIso = (d: Date | string | null) => (d === null ? null : new Date(d).toISOString());
/**
 * Date.parse of an ISO date or date-time (YYYY-MM-DD, then nothing or a T, t or space and the time), NaN for any other
 * spelling and when the calendar day written does not exist: Date.parse alone rolls 2026-02-30T10:00:00Z (and
 * 'Feb 30 2026') over to March 2nd.
 */
export function parseCalendarInstant(value: string): number {
  const day = /^(\d{4}-\d{2}-\d{2})(?:[Tt ]|$)/.exec(value)?.[1];
  if (day === undefined) return Number.NaN;
  const ms = Date.parse(value);
  if (Number.isNaN(ms)) return ms;
  const midnight = Date.parse(`${day}T00:00:00Z`);
  return !Number.isNaN(midnight) && new Date(midnight).toISOString().startsWith(day) ? ms : Number.NaN;
}
export const deletedSchema = z.object({ deleted: z.literal(true), id: z.string() });

/**
 * A whole number from a query string: decimal digits only. `Number()` (and z.coerce) would also read `0x10`,
 * `1e3`, ` 5`, `0b11` and the empty string. JSON callers (tRPC, GraphQL) may send a number.
 */
export const queryInt = (bounds: { min: number; max: number }) =>
  z
    .union([
      z.number(),
      z
        .string()
        .regex(/^\d{1,15}$/, 'must be a whole number written in decimal digits')
        .transform(Number),
    ])
    .pipe(z.number().int().min(bounds.min).max(bounds.max))
    // Documented as what a REST client writes: an integer in range (the number branch is for JSON callers).
    .meta({
      override: ({ jsonSchema }: { jsonSchema: Record<string, unknown> }) => {
        delete jsonSchema.anyOf;
        Object.assign(jsonSchema, { type: 'integer', minimum: bounds.min, maximum: bounds.max });
      },
    });

/** What a save did not refuse but the owner should know (e.g. a host name that did not resolve yet). */
export const saveWarningsSchema = z.array(z.string()).optional().meta({
  description: 'Present when the save succeeded with something to know, e.g. "url: hooks.example.com did not resolve; it will be checked again at each call"',
});
