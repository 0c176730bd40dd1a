/** Postgres unique violation (SQLSTATE 23505), as raised by both postgres.js and PGlite. */
export const isUniqueViolation = (error: unknown) => (error as { code?: string } | null)?.code === '23505';
