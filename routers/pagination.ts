import { isUuid } from '../schema/common.ts';
import { AppError } from '../schema/errors.ts';

/**
 * Keyset pagination, newest first: the opaque cursor is the (createdAt, id) of the last row shown. Tables paged
 * this way store milliseconds, the precision the API shows, so the cursor falls exactly on a row.
 */
const ISO_INSTANT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
export const encodeCursor = (createdAt: string, id: string) => Buffer.from(JSON.stringify([createdAt, id])).toString('base64url');
export function decodeCursor(cursor: string): { createdAt: string; id: string } {
  try {
    const [createdAt, id] = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as [unknown, unknown];
    // Exactly the form toIso() writes, of a row made since 1970: Date.parse alone accepts years the database cannot
    // store (year 0000 was refused by PostgreSQL, as a 500).
    if (typeof createdAt === 'string' && ISO_INSTANT.test(createdAt) && Date.parse(createdAt) >= 0 && typeof id === 'string' && isUuid(id))
      return { createdAt, id };
  } catch {
    // falls through to the error below
  }
  throw new AppError('VALIDATION_FAILED', 'Invalid request parameters', 'cursor: not a cursor returned by this endpoint');
}
