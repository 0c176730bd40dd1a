import type { PGlite } from '@electric-sql/pglite';
import {
  CompiledQuery,
  PostgresAdapter,
  PostgresIntrospector,
  PostgresQueryCompiler,
  type DatabaseConnection,
  type Dialect,
  type Driver,
  type Kysely,
  type QueryResult,
} from 'kysely';

/**
 * A Kysely dialect for embedded PGlite. PGlite is a single connection, so a transaction must own it
 * exclusively: every acquire waits for the previous holder to release (a FIFO mutex). The published
 * PGlite dialects pin older PGlite releases, hence this small one of our own.
 */
export class PGliteDialect implements Dialect {
  constructor(private readonly pglite: PGlite) {}
  createAdapter() {
    return new PostgresAdapter();
  }
  createDriver(): Driver {
    return new PGliteDriver(this.pglite);
  }
  createIntrospector(db: Kysely<any>) {
    return new PostgresIntrospector(db);
  }
  createQueryCompiler() {
    return new PostgresQueryCompiler();
  }
}

class PGliteConnection implements DatabaseConnection {
  constructor(private readonly pglite: PGlite) {}
  async executeQuery<R>(query: CompiledQuery): Promise<QueryResult<R>> {
    const result = await this.pglite.query<R>(query.sql, query.parameters as unknown[], { rowMode: 'object' });
    return {
      rows: result.rows,
      numAffectedRows: result.affectedRows === undefined ? undefined : BigInt(result.affectedRows),
    };
  }
  // eslint-disable-next-line require-yield
  async *streamQuery<R>(): AsyncIterableIterator<QueryResult<R>> {
    throw new Error('streaming queries are not supported on PGlite');
  }
}

class PGliteDriver implements Driver {
  private readonly connection: PGliteConnection;
  private tail: Promise<void> = Promise.resolve();
  private release: (() => void) | undefined;

  constructor(private readonly pglite: PGlite) {
    this.connection = new PGliteConnection(pglite);
  }
  async init() {
    await this.pglite.waitReady;
  }
  async acquireConnection(): Promise<DatabaseConnection> {
    const previous = this.tail;
    let release!: () => void;
    this.tail = new Promise<void>((resolve) => (release = resolve));
    await previous;
    this.release = release;
    return this.connection;
  }
  async beginTransaction(conn: DatabaseConnection) {
    await conn.executeQuery(CompiledQuery.raw('begin'));
  }
  async commitTransaction(conn: DatabaseConnection) {
    await conn.executeQuery(CompiledQuery.raw('commit'));
  }
  async rollbackTransaction(conn: DatabaseConnection) {
    await conn.executeQuery(CompiledQuery.raw('rollback'));
  }
  async releaseConnection() {
    const release = this.release;
    this.release = undefined;
    release?.();
  }
  async destroy() {
    await this.tail;
    if (!this.pglite.closed) await this.pglite.close();
  }
}
