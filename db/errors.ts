import { NoResultError } from 'kysely';

/** Postgres unique violation (SQLSTATE 23505), as raised by both postgres.js and PGlite. */
export const isUniqueViolation = (error: unknown) => (error as { code?: string } | null)?.code === '23505';

/** Postgres exclusion-constraint violation (SQLSTATE 23P01): two rows the constraint says may not coexist. */
export const isExclusionViolation = (error: unknown) => (error as { code?: string } | null)?.code === '23P01';

/** Postgres foreign-key violation (SQLSTATE 23503), of `constraint` when given. */
export const isForeignKeyViolation = (error: unknown, constraint?: string) => {
  const fields = error as { code?: string; constraint?: string; constraint_name?: string } | null;
  return fields?.code === '23503' && (constraint === undefined || (fields.constraint ?? fields.constraint_name) === constraint);
};

/** A statement expected to return a row returned none (Kysely's `executeTakeFirstOrThrow`). */
export const isNoResult = (error: unknown) => error instanceof NoResultError;

/**
 * The database itself refused the statement (it reported a SQLSTATE outside class 08, connection exception), so an
 * autocommit statement so refused was rolled back. Any other error (the connection lost, the embedded database's
 * thread gone) leaves the outcome unknown: the server may still commit a statement its client gave up on.
 */
export const isRefusedByDatabase = (error: unknown) => {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) && !code.startsWith('08');
};
