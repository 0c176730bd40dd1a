import { sql, type Kysely } from 'kysely';
import type { DB } from './types.ts';

/** What one maintenance pass did to one table, and how long the database was busy with it. */
export interface TableMaintenance {
  table: string;
  action: 'vacuum' | 'analyze' | 'freeze';
  ms: number;
}

/** autovacuum_freeze_max_age's default: past it, autovacuum vacuums a table whatever its dead rows. */
const FREEZE_MAX_AGE = 200_000_000;

/**
 * The embedded database runs as PostgreSQL's standalone backend, in which autovacuum never runs: without this every
 * updated or deleted row stays a dead tuple for good (the jobs table and its partial indexes grow with every job, and
 * each claim reads through them), the data directory only grows, the planner's statistics are never refreshed, and
 * nothing freezes old rows before transaction ids wrap around (which a standalone backend does not stop).
 * A pass does what autovacuum would, with its default thresholds: any table, the catalogs included, whose oldest
 * unfrozen transaction is older than `freezeMaxAge` is vacuumed with FREEZE; a table of ours whose dead rows exceed
 * 50 + 20 % of its live ones is vacuumed and analysed; one changed by more than 50 + 10 % since it was last analysed
 * is analysed. One table at a time, worst first. Each is one statement, during which the database is busy (PGlite
 * runs in its own thread, so requests that need no database are still answered): its cost follows the table's size,
 * a second or so for a table of a few hundred megabytes. A server's own autovacuum does all this on PostgreSQL.
 */
export async function maintainLikeAutovacuum(db: Kysely<DB>, options: { freezeMaxAge?: number } = {}): Promise<TableMaintenance[]> {
  const freezeMaxAge = options.freezeMaxAge ?? FREEZE_MAX_AGE;
  const { rows: old } = await sql<{ table: string }>`
    select c.oid::regclass::text as "table" from pg_class c
     where c.relkind in ('r', 'm') and c.relpersistence = 'p' and age(c.relfrozenxid) > ${freezeMaxAge}
     order by age(c.relfrozenxid) desc`.execute(db);
  const { rows: churned } = await sql<{ table: string; action: 'vacuum' | 'analyze' }>`
    select relname as "table", case when n_dead_tup > 50 + 0.2 * n_live_tup then 'vacuum' else 'analyze' end as action
      from pg_stat_user_tables
     where schemaname = 'public' and (n_dead_tup > 50 + 0.2 * n_live_tup or n_mod_since_analyze > 50 + 0.1 * n_live_tup)
     order by n_dead_tup desc, n_mod_since_analyze desc`.execute(db);
  const done: TableMaintenance[] = [];
  const timed = async (table: string, action: TableMaintenance['action'], statement: ReturnType<typeof sql>) => {
    const started = performance.now();
    await statement.execute(db);
    done.push({ table, action, ms: Math.round(performance.now() - started) });
  };
  // A regclass's text is the table's name as SQL spells it (schema-qualified and quoted where it must be).
  for (const { table } of old) await timed(table, 'freeze', sql`vacuum (freeze) ${sql.raw(table)}`);
  const frozen = new Set(old.map((t) => t.table));
  for (const { table, action } of churned) {
    if (frozen.has(table)) continue;
    if (action === 'vacuum') await timed(table, 'vacuum', sql`vacuum (analyze) ${sql.table(table)}`);
    else await timed(table, 'analyze', sql`analyze ${sql.table(table)}`);
  }
  return done;
}
