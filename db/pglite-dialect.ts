import { parse, protocol, type PGlite } from '@electric-sql/pglite';
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
const { serialize } = protocol;
const { parseResults, parseDescribeStatementResults } = parse;
type BackendMessage = Parameters<typeof parseResults>[0][number];

/**
 * bytea both ways without PGlite's own codec, which builds a two-character string for every byte it sends and calls
 * parseInt for every byte it reads: that was most of the time of writing and reading stored vectors. Parameters go
 * in the binary format (the bytes as they are); results come in PostgreSQL's hex text form (`\x…`, bytea_output's
 * default), decoded natively. Values are Buffers, which are Uint8Arrays, as postgres.js gives them.
 */
const BYTEA = 17;

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

/** Prepared statements kept per database (PGlite is one session); the least recently used is closed beyond this. */
const MAX_PREPARED_STATEMENTS = 256;

interface PreparedStatement {
  name: string;
  paramTypes: number[];
  /** The description of its rows, absent for a statement that returns none. */
  rowDescription: BackendMessage | undefined;
  /** False for the statements whose rows PostgreSQL does not hold to the prepared description (UNFIXED_RESULT). */
  fixedResult: boolean;
}

/**
 * Statements whose rows can change shape between runs without the error a changed table gives (they are not
 * planned: a cursor's FETCH or MOVE, SQL-level EXECUTE, CALL), after any leading comments. Theirs are described
 * on every run.
 */
const UNFIXED_RESULT = /^(?:\s|--[^\n]*(?:\n|$)|\/\*[\s\S]*?\*\/)*(?:fetch|move|execute|call)\b/i;

/**
 * Runs each statement as a named prepared statement, prepared once per SQL text. PGlite's own query() makes six
 * calls into the engine per statement (parse, describe, bind, describe, execute, sync) and plans the statement
 * every time; here a statement seen before is one call (bind, execute, sync) on a plan PostgreSQL caches,
 * as postgres.js does on a server. Parameters are serialised and rows parsed with PGlite's own type maps, so
 * values come back exactly as from query().
 */
/** The longest the database may hold the thread across consecutive statements before they let other work run. */
const MAX_RUN_WITHOUT_PAUSE_MS = 20;

class PGliteConnection implements DatabaseConnection {
  private readonly statements = new Map<string, PreparedStatement>();
  private inRun = false;
  private runStarted = 0;
  private nextStatement = 0;
  private readonly parsers: typeof this.pglite.parsers;

  constructor(private readonly pglite: PGlite) {
    // Layered over PGlite's table, so parsers it adds later (array types it learns) are still found. Anything but
    // the hex form (another bytea_output) is left to PGlite's parser.
    const parseBytea = pglite.parsers[BYTEA];
    this.parsers = Object.assign(Object.create(pglite.parsers), {
      [BYTEA]: (text: string, type: number) => (text.startsWith('\\x') ? Buffer.from(text.slice(2), 'hex') : parseBytea?.(text, type)),
    });
  }

  async executeQuery<R>(query: CompiledQuery): Promise<QueryResult<R>> {
    // PGlite runs in this thread and a statement settles without any I/O in between, so a run of statements (a
    // large ingestion's inserts, an index build's pages) would otherwise hold the event loop for seconds: no
    // request would be read and keep-alive sockets would time out meanwhile. A run starts with the first
    // statement after the event loop last had a turn; past a few milliseconds, the run pauses for one turn.
    if (!this.inRun) {
      this.inRun = true;
      this.runStarted = performance.now();
      setImmediate(this.endRun);
    }
    const result = await this.run<R>(query);
    if (this.inRun && performance.now() - this.runStarted > MAX_RUN_WITHOUT_PAUSE_MS) await new Promise((resolve) => setImmediate(resolve));
    return result;
  }

  private readonly endRun = () => {
    this.inRun = false;
  };

  private run<R>(query: CompiledQuery): Promise<QueryResult<R>> {
    return this.pglite.runExclusive(async () => {
      try {
        return await this.execute<R>(query);
      } catch (error) {
        // A table changed under a cached statement (a migration): PostgreSQL fails the statement rather than change
        // its rows' shape. It is prepared anew next time, and run again now where that loses nothing (outside a
        // transaction, which the error has aborted), as postgres.js does.
        if (!changedResultType(error)) throw error;
        // Best effort: a statement left behind on a failed close is only a name never used again.
        await this.forget(query.sql).catch(() => {});
        if (this.pglite.isInTransaction()) throw error;
        return this.execute<R>(query);
      }
    });
  }

  private async execute<R>(query: CompiledQuery): Promise<QueryResult<R>> {
    const statement = this.statements.get(query.sql) ?? (await this.prepare(query.sql));
    // Most recently used last, so the first key is the one to close when the cache is full.
    this.statements.delete(query.sql);
    this.statements.set(query.sql, statement);
    const values = query.parameters.map((value, i) => this.serialize(value, statement.paramTypes[i]));
    const bind = serialize.bind({ statement: statement.name, values });
    // A fixed result's rows are described as when the statement was prepared (PostgreSQL fails a prepared statement
    // rather than change its result type), so the description is not asked for and parsed again on every execution.
    const describe = statement.fixedResult ? [] : [serialize.describe({ type: 'P' })];
    const { messages } = await this.pglite.execProtocol(concat([bind, ...describe, serialize.execute({}), serialize.sync()]));
    const described = statement.fixedResult && statement.rowDescription ? [statement.rowDescription, ...messages] : messages;
    const [result] = parseResults(described, this.parsers, { rowMode: 'object' });
    return {
      rows: (result?.rows ?? []) as R[],
      numAffectedRows: result?.affectedRows === undefined ? undefined : BigInt(result.affectedRows),
    };
  }

  private async forget(text: string) {
    const statement = this.statements.get(text);
    if (!statement) return;
    this.statements.delete(text);
    await this.pglite.execProtocol(concat([serialize.close({ type: 'S', name: statement.name }), serialize.sync()]));
  }

  private async prepare(text: string) {
    // The least recently used goes first, so a failure here cannot leave the new statement unrecorded on the server.
    if (this.statements.size >= MAX_PREPARED_STATEMENTS) await this.forget(this.statements.keys().next().value!);
    const name = `k${++this.nextStatement}`;
    const { messages } = await this.pglite.execProtocol(concat([serialize.parse({ name, text }), serialize.describe({ type: 'S', name }), serialize.sync()]));
    const statement: PreparedStatement = {
      name,
      paramTypes: parseDescribeStatementResults(messages),
      rowDescription: messages.find((message) => message.name === 'rowDescription'),
      fixedResult: !UNFIXED_RESULT.test(text),
    };
    this.statements.set(text, statement);
    return statement;
  }

  /** As PGlite's query(): by the parameter's type, with its serialisers; text otherwise. Bytes go as they are. */
  private serialize(value: unknown, type: number | undefined): string | Uint8Array | null {
    if (value === null || value === undefined) return null;
    // Sent in the binary format, which for bytea is the bytes themselves.
    if (type === BYTEA && value instanceof Uint8Array) return value;
    const serializer = type === undefined ? undefined : this.pglite.serializers[type];
    return serializer ? serializer(value) : String(value);
  }

  // eslint-disable-next-line require-yield
  // biome-ignore lint/correctness/useYield: Kysely's driver interface requires a generator; PGlite cannot stream.
  async *streamQuery<R>(): AsyncIterableIterator<QueryResult<R>> {
    throw new Error('streaming queries are not supported on PGlite');
  }
}

/** PostgreSQL's error for a prepared statement whose table changed shape since it was prepared. */
function changedResultType(error: unknown): boolean {
  return (error as { code?: unknown })?.code === '0A000' && /cached plan must not change result type/.test(String((error as Error).message));
}

function concat(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.byteLength, 0));
  let offset = 0;
  for (const part of parts) {
    out.set(part, offset);
    offset += part.byteLength;
  }
  return out;
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
