import { sql, type Kysely } from 'kysely';
import type { DB } from './types.ts';

/** What one maintenance pass did to one table. */
export interface TableMaintenance {
  table: string;
  action: 'vacuum' | 'analyze';
}

/**
 * The embedded database runs as PostgreSQL's standalone backend, in which autovacuum never runs: without this every
 * updated or deleted row stays a dead tuple for good (the jobs table and its partial indexes grow with every job, and
 * each claim reads through them), the data directory only grows, and the planner's statistics are never refreshed.
 * A pass does what autovacuum would, with its default thresholds: a table whose dead rows exceed 50 + 20 % of its
 * live ones is vacuumed and analysed; one changed by more than 50 + 10 % since it was last analysed is analysed.
 * One table at a time, worst first. A server's own autovacuum does this on PostgreSQL.
 */
export async function maintainLikeAutovacuum(db: Kysely<DB>): Promise<TableMaintenance[]> {
  const { rows } = await sql<TableMaintenance>`
    select relname as "table", case when n_dead_tup > 50 + 0.2 * n_live_tup then 'vacuum' else 'analyze' end as action
      from pg_stat_user_tables
     where schemaname = 'public' and (n_dead_tup > 50 + 0.2 * n_live_tup or n_mod_since_analyze > 50 + 0.1 * n_live_tup)
     order by n_dead_tup desc, n_mod_since_analyze desc`.execute(db);
  for (const { table, action } of rows) {
    if (action === 'vacuum') await sql`vacuum (analyze) ${sql.table(table)}`.execute(db);
    else await sql`analyze ${sql.table(table)}`.execute(db);
  }
  return rows;
}
