import { parse, protocol, type PGlite } from '@electric-sql/pglite';

/**
 * Runs statements on PGlite (in the thread that owns it: db/pglite-worker.ts) as named prepared statements, prepared
 * once per SQL text. PGlite's own query() makes six calls into the engine per statement (parse, describe, bind,
 * describe, execute, sync) and plans the statement every time; here a statement seen before is one call (bind,
 * execute, sync) on a plan PostgreSQL caches, as postgres.js does on a server. Parameters are serialised and rows
 * parsed with PGlite's own type maps, so values come back exactly as from query().
 */
const { serialize } = protocol;
const { parseResults, parseDescribeStatementResults } = parse;
type BackendMessage = Parameters<typeof parseResults>[0][number];

/**
 * bytea both ways without PGlite's own codec, which builds a two-character string for every byte it sends and calls
 * parseInt for every byte it reads: that was most of the time of writing and reading stored vectors. Parameters go
 * in the binary format (the bytes as they are); results come in PostgreSQL's hex text form (`\x…`, bytea_output's
 * default), decoded natively.
 */
const BYTEA = 17;

/** Prepared statements kept per database (PGlite is one session); the least recently used is closed beyond this. */
const MAX_PREPARED_STATEMENTS = 256;

export interface StatementResult {
  rows: Record<string, unknown>[];
  affectedRows: number | undefined;
  /** The columns whose values are bytea (Uint8Arrays), for the receiving thread to make Buffers again. */
  byteaColumns: string[];
}

interface PreparedStatement {
  name: string;
  paramTypes: number[];
  /** The description of its rows, absent for a statement that returns none. */
  rowDescription: BackendMessage | undefined;
  /** False for the statements whose rows PostgreSQL does not hold to the prepared description (UNFIXED_RESULT). */
  fixedResult: boolean;
  byteaColumns: string[];
}

/**
 * Statements whose rows can change shape between runs without the error a changed table gives (they are not
 * planned: a cursor's FETCH or MOVE, SQL-level EXECUTE, CALL), after any leading comments. Theirs are described
 * on every run.
 */
const UNFIXED_RESULT = /^(?:\s|--[^\n]*(?:\n|$)|\/\*[\s\S]*?\*\/)*(?:fetch|move|execute|call)\b/i;

export class PGliteSession {
  private readonly statements = new Map<string, PreparedStatement>();
  private nextStatement = 0;
  private readonly parsers: PGlite['parsers'];

  constructor(private readonly pglite: PGlite) {
    // Layered over PGlite's table, so parsers it adds later (array types it learns) are still found. Anything but
    // the hex form (another bytea_output) is left to PGlite's parser.
    const parseBytea = pglite.parsers[BYTEA];
    this.parsers = Object.assign(Object.create(pglite.parsers), {
      [BYTEA]: (text: string, type: number) => (text.startsWith('\\x') ? hexBytes(text) : parseBytea?.(text, type)),
    });
  }

  /** One statement, alone on the engine while it runs. */
  run(sql: string, parameters: readonly unknown[]): Promise<StatementResult> {
    return this.pglite.runExclusive(async () => {
      try {
        return await this.execute(sql, parameters);
      } catch (error) {
        // A table changed under a cached statement (a migration): PostgreSQL fails the statement rather than change
        // its rows' shape. It is prepared anew next time, and run again now where that loses nothing (outside a
        // transaction, which the error has aborted), as postgres.js does.
        if (!changedResultType(error)) throw error;
        // Best effort: a statement left behind on a failed close is only a name never used again.
        await this.forget(sql).catch(() => {});
        if (this.pglite.isInTransaction()) throw error;
        return this.execute(sql, parameters);
      }
    });
  }

  private async execute(sql: string, parameters: readonly unknown[]): Promise<StatementResult> {
    const statement = this.statements.get(sql) ?? (await this.prepare(sql));
    // Most recently used last, so the first key is the one to close when the cache is full.
    this.statements.delete(sql);
    this.statements.set(sql, statement);
    const values = parameters.map((value, i) => this.serialize(value, statement.paramTypes[i]));
    const bind = serialize.bind({ statement: statement.name, values });
    // A fixed result's rows are described as when the statement was prepared (PostgreSQL fails a prepared statement
    // rather than change its result type), so the description is not asked for and parsed again on every execution.
    const describe = statement.fixedResult ? [] : [serialize.describe({ type: 'P' })];
    const { messages } = await this.pglite.execProtocol(concat([bind, ...describe, serialize.execute({}), serialize.sync()]));
    const described = statement.fixedResult && statement.rowDescription ? [statement.rowDescription, ...messages] : messages;
    const [result] = parseResults(described, this.parsers, { rowMode: 'object' });
    const byteaColumns = statement.fixedResult ? statement.byteaColumns : byteaColumnsOf(result?.fields);
    return { rows: (result?.rows ?? []) as Record<string, unknown>[], affectedRows: result?.affectedRows, byteaColumns };
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
    const rowDescription = messages.find((message) => message.name === 'rowDescription');
    const statement: PreparedStatement = {
      name,
      paramTypes: parseDescribeStatementResults(messages),
      rowDescription,
      fixedResult: !UNFIXED_RESULT.test(text),
      byteaColumns: byteaColumnsOf((rowDescription as { fields?: { name: string; dataTypeID: number }[] } | undefined)?.fields),
    };
    this.statements.set(text, statement);
    return statement;
  }

  /** As PGlite's query(): by the parameter's type, with its serialisers; text otherwise. Bytes go as they are. */
  private serialize(value: unknown, type: number | undefined): string | Uint8Array | null {
    if (value === null || value === undefined) return null;
    // Sent in the binary format, which for bytea is the bytes themselves.
    if (type === BYTEA && value instanceof Uint8Array) return value;
    // Bytes arrive from the request thread as plain Uint8Arrays: as Buffers again, they make the text they made in
    // process (String() of a Buffer is its UTF-8, of a Uint8Array its numbers).
    const given = value instanceof Uint8Array && !Buffer.isBuffer(value) ? Buffer.from(value.buffer, value.byteOffset, value.byteLength) : value;
    const serializer = type === undefined ? undefined : this.pglite.serializers[type];
    return serializer ? serializer(given) : String(given);
  }
}

/**
 * The bytes of `\x…` in a buffer of their own: a small Buffer.from() is a slice of a shared pool, and the whole pool
 * would be copied when the rows are posted to the request thread.
 */
function hexBytes(text: string): Buffer {
  const bytes = Buffer.allocUnsafeSlow((text.length - 2) >>> 1);
  bytes.write(text.slice(2), 'hex');
  return bytes;
}

function byteaColumnsOf(fields: readonly { name: string; dataTypeID: number }[] | undefined): string[] {
  return (fields ?? []).filter((field) => field.dataTypeID === BYTEA).map((field) => field.name);
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
