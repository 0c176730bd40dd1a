import { sql, type Transaction } from 'kysely';
import { afterAll, beforeAll, expect } from 'vitest';
import type { Database } from '../../db/database.ts';
import type { DB } from '../../db/types.ts';
import { openTestDatabase } from './test-app.ts';

/**
 * The calling test file's own migrated database (PGlite, or PostgreSQL with DATABASE_URL), for repository tests that
 * need no app: opened before the file's tests, closed and dropped after them.
 */
export function perFileTestDatabase() {
  let opened: Awaited<ReturnType<typeof openTestDatabase>> | undefined;

  beforeAll(async () => {
    opened = await openTestDatabase();
  });

  afterAll(async () => {
    await opened?.database.close();
    await opened?.drop();
  });

  function current(): Database {
    if (!opened) throw new Error('the test database opens in beforeAll: use it inside a test');
    return opened.database;
  }

  return {
    get database() {
      return current();
    },

    /** Runs fn in a transaction that is always rolled back, with foreign keys off inside: no parent rows needed, and
     * nothing it writes (schema changes included) outlives the test. */
    async inRolledBackTransaction(fn: (trx: Transaction<DB>) => Promise<void>) {
      const rollback = new Error('rollback');
      await expect(
        current()
          .db.transaction()
          .execute(async (trx) => {
            await sql`set local session_replication_role = replica`.execute(trx);
            await fn(trx);
            throw rollback;
          }),
      ).rejects.toBe(rollback);
    },
  };
}
