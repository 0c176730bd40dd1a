import { sql, type RawBuilder } from 'kysely';
import { storableJson } from '../schema/text-input.ts';

/**
 * A JSON value for a jsonb column. Sent as text and cast in SQL, because the two drivers disagree on
 * untyped parameters (postgres.js would JSON-encode a string a second time). Made storable first: jsonb refuses
 * NUL and unpaired surrogates, which a provider's reply may hold (a client's input was refused already).
 */
export function jsonb<T>(value: T): RawBuilder<T> {
  return sql<T>`cast(${storableJson(value)}::text as jsonb)`;
}
