import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openPGlite, type Database } from './database.ts';
import { migrateToLatest } from './migrate.ts';
import { maintainLikeAutovacuum } from './pglite-maintenance.ts';

// Always on PGlite: the embedded database is the one without autovacuum.
let database: Database;

beforeAll(async () => {
  database = await openPGlite({});
  await migrateToLatest(database.db);
});

afterAll(async () => {
  await database?.close();
});

/**
 * PostgreSQL publishes a backend's table counters when a transaction ends at least a second after it last did (a
 * standalone backend has no idle timer to do it), so: wait, then end a transaction.
 */
async function countersPublished() {
  await new Promise((resolve) => setTimeout(resolve, 1_100));
  await sql`select 1`.execute(database.db);
}

const deadRows = async (table: string) =>
  Number((await sql<{ n: number }>`select n_dead_tup as n from pg_stat_user_tables where relname = ${table}`.execute(database.db)).rows[0]?.n ?? 0);

describe('maintainLikeAutovacuum (PGlite)', () => {
  it('vacuums the tables that churned, as autovacuum would, and leaves the rest', async () => {
    const db = database.db;
    // Nothing runs autovacuum here: dead rows stay.
    await sql`insert into jobs (id, kind, payload) select gen_random_uuid(), 'churn', '{}'::jsonb from generate_series(1, 2000)`.execute(db);
    await sql`update jobs set status = 'running' where kind = 'churn'`.execute(db);
    await sql`update jobs set status = 'done' where kind = 'churn'`.execute(db);
    await countersPublished();
    expect(await deadRows('jobs')).toBeGreaterThanOrEqual(4000);

    const done = await maintainLikeAutovacuum(db);
    expect(done).toContainEqual({ table: 'jobs', action: 'vacuum', ms: expect.any(Number) });
    expect(await deadRows('jobs')).toBe(0);

    // A second pass finds nothing more to do on that table.
    expect((await maintainLikeAutovacuum(db)).map((t) => t.table)).not.toContain('jobs');
  });

  it('analyses a table that grew without dead rows, so the planner sees its size', async () => {
    const db = database.db;
    await maintainLikeAutovacuum(db);
    await sql`insert into security_events (id, kind, occurred_at) select gen_random_uuid(), 'probe', now() from generate_series(1, 300)`.execute(db);
    await countersPublished();
    expect(await maintainLikeAutovacuum(db)).toContainEqual({ table: 'security_events', action: 'analyze', ms: expect.any(Number) });
    const { rows } = await sql<{ analysed: Date | null }>`select last_analyze as analysed from pg_stat_user_tables where relname = 'security_events'`.execute(
      db,
    );
    expect(rows[0]?.analysed).not.toBeNull();
  });

  it('freezes any table, the catalogs too, whose oldest unfrozen transaction is past the limit', async () => {
    const db = database.db;
    const age = async (table: string) =>
      Number((await sql<{ age: number }>`select age(relfrozenxid) as age from pg_class where oid = ${table}::regclass`.execute(db)).rows[0]!.age);
    // Transactions to age them: the limit is autovacuum's 200 million; here it is lowered to what the test can reach.
    for (let i = 0; i < 20; i++) await sql`insert into security_events (id, kind, occurred_at) values (gen_random_uuid(), 'age', now())`.execute(db);
    const before = await age('owners');
    expect(before).toBeGreaterThan(10);
    const done = await maintainLikeAutovacuum(db, { freezeMaxAge: 10 });
    expect(done).toContainEqual({ table: 'owners', action: 'freeze', ms: expect.any(Number) });
    expect(done).toContainEqual({ table: 'pg_class', action: 'freeze', ms: expect.any(Number) });
    expect(await age('owners')).toBeLessThan(before);
  });
});
