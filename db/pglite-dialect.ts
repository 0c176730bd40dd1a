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
import type { PGliteThread } from './pglite-thread.ts';

/**
 * A Kysely dialect for embedded PGlite, which runs in a thread of its own (db/pglite-thread.ts; its statements are
 * prepared once per SQL text there, db/pglite-session.ts). The published PGlite dialects pin older PGlite releases,
 * hence this small one of our own.
 *
 * PGlite is one session, and its thread runs statements in the order they are posted. A statement outside a
 * transaction is posted at once, without waiting for the ones before it to be answered: the engine has the next one
 * queued when it finishes one, instead of idling for two thread hops each time. A transaction owns the session from
 * its BEGIN to its COMMIT or ROLLBACK: transactions take turns (first come, first served), and no other statement is
 * posted in between, so none lands inside another caller's transaction. A `db.connection()` block outside a
 * transaction is not exclusive (the driver cannot tell it from a single statement): session state belongs in a
 * transaction (`set local`), as it would with a pool of connections.
 */
export class PGliteDialect implements Dialect {
  private readonly turns = new Turns();
  constructor(private readonly thread: PGliteThread) {}
  createAdapter() {
    return new PostgresAdapter();
  }
  createDriver(): Driver {
    return new PGliteDriver(this.thread, this.turns);
  }
  createIntrospector(db: Kysely<any>) {
    return new PostgresIntrospector(db);
  }
  createQueryCompiler() {
    return new PostgresQueryCompiler();
  }
  /** Runs `work` (a LISTEN, an UNLISTEN) with the session to itself, as a transaction would have it. */
  async alone<T>(work: () => Promise<T>): Promise<T> {
    const turn = await this.turns.take();
    try {
      return await work();
    } finally {
      turn.end();
    }
  }
}

/** Exclusive turns, first come first served; statements outside any turn wait only for the turns taken before them. */
class Turns {
  private tail: Promise<void> = Promise.resolve();
  private taken = 0;

  async take(): Promise<{ end(): void }> {
    const previous = this.tail;
    let end!: () => void;
    this.tail = new Promise<void>((resolve) => (end = resolve));
    this.taken++;
    await previous;
    let ended = false;
    return {
      end: () => {
        if (ended) return;
        ended = true;
        this.taken--;
        end();
      },
    };
  }

  /** Resolves when every turn taken so far has ended (at once when none is). */
  clear(): Promise<void> | undefined {
    return this.taken === 0 ? undefined : this.tail;
  }
}

class PGliteConnection implements DatabaseConnection {
  /** Set from this connection's BEGIN to its COMMIT or ROLLBACK. */
  turn: { end(): void } | undefined;
  /**
   * True from beginTransaction until the transaction's first statement, which carries the BEGIN to the thread in
   * its own message: a transaction holds the whole engine, and every hop to the thread and back is time the engine
   * waits for the request thread. A transaction that runs no statement sends neither BEGIN nor COMMIT.
   */
  beginPending = false;

  constructor(
    private readonly thread: PGliteThread,
    private readonly turns: Turns,
  ) {}

  async executeQuery<R>(query: CompiledQuery): Promise<QueryResult<R>> {
    const turns = this.turn ? undefined : this.turns.clear();
    if (turns) await turns;
    const begin = this.beginPending;
    this.beginPending = false;
    let result: Awaited<ReturnType<PGliteThread['run']>>;
    try {
      result = await this.thread.run(query.sql, query.parameters, begin ? { begin } : undefined);
    } catch (error) {
      // No BEGIN ran: the transaction's next statement must carry it, or it and the rest would run on their own.
      if (begin && (error as { transactionNotBegun?: boolean }).transactionNotBegun) this.beginPending = true;
      throw error;
    }
    return {
      rows: result.rows as R[],
      numAffectedRows: result.affectedRows === undefined ? undefined : BigInt(result.affectedRows),
    };
  }

  // biome-ignore lint/correctness/useYield: Kysely's driver interface requires a generator; PGlite cannot stream.
  async *streamQuery<R>(): AsyncIterableIterator<QueryResult<R>> {
    throw new Error('streaming queries are not supported on PGlite');
  }
}

class PGliteDriver implements Driver {
  constructor(
    private readonly thread: PGliteThread,
    private readonly turns: Turns,
  ) {}
  async init() {}
  async acquireConnection(): Promise<DatabaseConnection> {
    return new PGliteConnection(this.thread, this.turns);
  }
  async beginTransaction(conn: DatabaseConnection) {
    const connection = conn as PGliteConnection;
    connection.turn = await this.turns.take();
    connection.beginPending = true;
  }
  async commitTransaction(conn: DatabaseConnection) {
    // A failed COMMIT is followed by Kysely's ROLLBACK: the turn lasts until then.
    if (!(conn as PGliteConnection).beginPending) await conn.executeQuery(CompiledQuery.raw('commit'));
    this.endTurn(conn);
  }
  async rollbackTransaction(conn: DatabaseConnection) {
    try {
      if (!(conn as PGliteConnection).beginPending) await conn.executeQuery(CompiledQuery.raw('rollback'));
    } finally {
      this.endTurn(conn);
    }
  }
  async releaseConnection(conn: DatabaseConnection) {
    // A BEGIN that failed is followed by neither.
    this.endTurn(conn);
  }
  async destroy() {
    await this.turns.clear();
    await this.thread.close();
  }

  private endTurn(conn: DatabaseConnection) {
    const connection = conn as PGliteConnection;
    connection.turn?.end();
    connection.turn = undefined;
    connection.beginPending = false;
  }
}
