import { sql, type RawBuilder } from 'kysely';

/**
 * A JSON value for a jsonb column. Sent as text and cast in SQL, because the two drivers disagree on
 * untyped parameters (postgres.js would JSON-encode a string a second time).
 */
export function jsonb<T>(value: T): RawBuilder<T> {
  return sql<T>`cast(${JSON.stringify(value)}::text as jsonb)`;
}
