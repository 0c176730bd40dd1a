import { mkdirSync } from 'node:fs';
import { PGlite } from '@electric-sql/pglite';
import { vector } from '@electric-sql/pglite-pgvector';
import { Kysely, sql } from 'kysely';
import { PostgresJSDialect } from 'kysely-postgres-js';
import postgres from 'postgres';
import { PGliteDialect } from './pglite-dialect.ts';
import type { DB } from './types.ts';

export interface Database {
  db: Kysely<DB>;
  /** The embedded engine, when kind is 'pglite' (for data-directory dumps). */
  pglite?: PGlite;
  kind: 'pglite' | 'postgres';
  /** Round-trips to the database; throws when it is unreachable. */
  ping(): Promise<void>;
  close(): Promise<void>;
}

function wrap(db: Kysely<DB>, kind: Database['kind'], pglite?: PGlite): Database {
  return {
    db,
    kind,
    pglite,
    ping: async () => {
      await sql`select 1`.execute(db);
    },
    close: () => db.destroy(),
  };
}

/** PostgreSQL through postgres.js (production and the second CI pass). */
export function openPostgres(url: string, maxConnections = 10): Database {
  const client = postgres(url, { max: maxConnections, onnotice: () => {} });
  return wrap(new Kysely<DB>({ dialect: new PostgresJSDialect({ postgres: client }) }), 'postgres');
}

/** Embedded PGlite in a data directory (the zero-setup default). Never open one directory from two processes. */
export async function openPGlite(options: { dataDir?: string; loadDataDir?: Blob }): Promise<Database> {
  if (options.dataDir) mkdirSync(options.dataDir, { recursive: true });
  const pglite = await PGlite.create({ dataDir: options.dataDir, loadDataDir: options.loadDataDir, extensions: { vector } });
  return wrap(new Kysely<DB>({ dialect: new PGliteDialect(pglite) }), 'pglite', pglite);
}

/** A gzipped tarball of a PGlite data directory; openPGlite({ loadDataDir }) starts from it. */
export async function dumpPGlite(database: Database): Promise<Blob> {
  if (!database.pglite) throw new Error('not a PGlite database');
  return database.pglite.dumpDataDir('gzip');
}
