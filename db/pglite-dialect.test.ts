import { createHash } from 'node:crypto';
import { PGlite } from '@electric-sql/pglite';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { openPGlite, type Database } from './database.ts';
import { PGliteSession } from './pglite-session.ts';

/**
 * The dialect runs named prepared statements over PGlite's wire protocol, in the database's own thread; it must behave
 * as PGlite's query() in process. `inProcess` is a second engine in this thread, to compare with and to look inside.
 */
let database: Database;
let inProcess: PGlite;
let session: PGliteSession;
const TABLE = 'create table t (id int primary key, body jsonb, at timestamptz, bytes bytea, tags text[], flag boolean, n numeric, big bigint)';

beforeAll(async () => {
  database = await openPGlite({});
  await sql.raw(TABLE).execute(database.db);
  inProcess = await PGlite.create({});
  await inProcess.exec(TABLE);
  session = new PGliteSession(inProcess);
}, 60_000);

afterAll(async () => {
  await database?.close();
  await inProcess?.close();
});

describe('PGlite dialect', () => {
  it('sends and returns values exactly as PGlite query() does', async () => {
    const at = new Date('2026-11-22T01:02:03.456Z');
    const row = {
      id: 1,
      body: JSON.stringify({ a: [1, 'two'], b: null }),
      at,
      bytes: Buffer.from([0, 1, 254, 255]),
      tags: ['x', 'y z', 'quote"d'],
      flag: true,
      n: '12.50',
      big: '9007199254740993',
    };
    const values = [row.id, row.body, row.at, row.bytes, row.tags, row.flag, row.n, row.big];
    await sql`insert into t values (${sql.join(values)})`.execute(database.db);
    await session.run('insert into t values ($1, $2, $3, $4, $5, $6, $7, $8)', values);
    const ours = (await sql<Record<string, unknown>>`select * from t where id = ${1}`.execute(database.db)).rows[0];
    const inSession = (await session.run('select * from t where id = $1', [1])).rows[0];
    const theirs = (await inProcess.query<Record<string, unknown>>('select * from t where id = $1', [1])).rows[0];
    // bytea is ours to decode (a Buffer, as postgres.js gives it; query() makes a plain Uint8Array of the same bytes).
    expect(ours!.bytes).toBeInstanceOf(Buffer);
    expect({ ...ours, bytes: new Uint8Array(ours!.bytes as Uint8Array) }).toEqual(theirs);
    expect({ ...inSession, bytes: new Uint8Array(inSession!.bytes as Uint8Array) }).toEqual(theirs);
    expect(ours).toMatchObject({ id: 1, body: { a: [1, 'two'], b: null }, at, tags: row.tags, flag: true });
    expect(Buffer.from(ours!.bytes as Uint8Array)).toEqual(row.bytes);
  });

  it('sends bytes as they are and reads them back: every byte value, empty, large, and as PostgreSQL sees them', async () => {
    const every = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
    const large = Buffer.from(Array.from({ length: 300_000 }, (_, i) => (i * 7919) % 251));
    // PGlite's own bytea serialiser must not be used: the bytes travel in the binary format.
    const serializers = inProcess.serializers as Record<number, (value: unknown) => string>;
    const own = serializers[17];
    serializers[17] = () => {
      throw new Error('bytea went through the text serialiser');
    };
    onTestFinished(() => {
      if (own) serializers[17] = own;
    });
    for (const [id, bytes] of [
      [20, every],
      [21, Buffer.alloc(0)],
      [22, large],
      [23, new Uint8Array([0x5c, 0x78, 0x30])],
      [24, every.subarray(3, 200)], // a view into a larger buffer, at an offset
    ] as const) {
      const select = 'select bytes, length(bytes) as length, md5(bytes) as md5 from t where id = $1';
      await session.run('insert into t (id, bytes) values ($1, $2)', [id, bytes]);
      await sql`insert into t (id, bytes) values (${id}, ${bytes})`.execute(database.db);
      const inSession = (await session.run(select, [id])).rows;
      const { rows } = await sql<{ bytes: Uint8Array; length: number; md5: string }>`
        select bytes, length(bytes) as length, md5(bytes) as md5 from t where id = ${id}`.execute(database.db);
      for (const row of [rows[0]!, inSession[0] as (typeof rows)[0]]) {
        expect(Buffer.from(row.bytes).equals(Buffer.from(bytes))).toBe(true);
        expect(row.length).toBe(bytes.length);
        expect(row.md5).toBe(createHash('md5').update(bytes).digest('hex'));
      }
      // Bytes read come in a buffer of their own, not a view into a shared pool (which would be posted whole).
      expect(inSession[0]!.bytes).toBeInstanceOf(Buffer);
      expect((inSession[0]!.bytes as Buffer).buffer.byteLength).toBe(bytes.length);
    }
  });

  it('runs in a thread of its own: a long statement does not hold this thread', async () => {
    let turns = 0;
    let running = true;
    const tick = () => {
      turns++;
      if (running) setTimeout(tick, 1);
    };
    setTimeout(tick, 1);
    const started = performance.now();
    await sql`select count(*) from generate_series(1, 4000000)`.execute(database.db);
    const took = performance.now() - started;
    running = false;
    // One statement, run in this thread, would let no timer fire until it ended.
    expect(took).toBeGreaterThan(50);
    expect(turns).toBeGreaterThanOrEqual(Math.min(10, Math.floor(took / 20)));
  });

  it('posts statements outside a transaction without waiting, in the order they were made', async () => {
    await sql`create table ordered (n int)`.execute(database.db);
    const made = Array.from({ length: 50 }, (_, n) => sql`insert into ordered values (${n})`.execute(database.db));
    const seen = sql<{ ns: number[] }>`select coalesce(array_agg(n order by n), '{}') as ns from ordered`.execute(database.db);
    await Promise.all(made);
    expect((await seen).rows[0]!.ns).toEqual(Array.from({ length: 50 }, (_, n) => n));
  });

  it("never lands another caller's statement inside a transaction: it waits for the COMMIT or ROLLBACK", async () => {
    await sql`create table apart (n int)`.execute(database.db);
    let reachedInside!: () => void;
    const inside = new Promise<void>((resolve) => (reachedInside = resolve));
    let letGo!: () => void;
    const held = new Promise<void>((resolve) => (letGo = resolve));
    const rolledBack = database.db
      .transaction()
      .execute(async (trx) => {
        await sql`insert into apart values (1)`.execute(trx);
        reachedInside();
        await held;
        throw new Error('roll back');
      })
      .catch((error: Error) => error.message);
    await inside;
    // Made while the transaction is open: had they run inside it, the count would see its row and the insert would
    // be rolled back with it.
    const count = sql<{ n: number }>`select count(*)::int as n from apart`.execute(database.db);
    const insert = sql`insert into apart values (2)`.execute(database.db);
    await new Promise((resolve) => setTimeout(resolve, 50));
    letGo();
    expect(await rolledBack).toBe('roll back');
    expect((await count).rows[0]!.n).toBe(0);
    await insert;
    expect((await sql<{ n: number }>`select n from apart`.execute(database.db)).rows).toEqual([{ n: 2 }]);
  });

  it('gives transactions turns: read-modify-write in two at once loses no update, and a failed COMMIT rolls back only its own', async () => {
    await sql`create table counter (n int)`.execute(database.db);
    await sql`insert into counter values (0)`.execute(database.db);
    const increment = () =>
      database.db.transaction().execute(async (trx) => {
        const { rows } = await sql<{ n: number }>`select n from counter`.execute(trx);
        await new Promise((resolve) => setTimeout(resolve, 20));
        await sql`update counter set n = ${rows[0]!.n + 1}`.execute(trx);
      });
    await Promise.all([increment(), increment(), increment()]);
    expect((await sql<{ n: number }>`select n from counter`.execute(database.db)).rows).toEqual([{ n: 3 }]);

    await sql`create table deferred (id int, constraint deferred_once unique (id) deferrable initially deferred)`.execute(database.db);
    const failing = database.db.transaction().execute(async (trx) => {
      await sql`insert into deferred values (1), (1)`.execute(trx);
    });
    const next = database.db.transaction().execute(async (trx) => {
      await sql`insert into deferred values (2)`.execute(trx);
    });
    await expect(failing).rejects.toMatchObject({ code: '23505' });
    await next;
    expect((await sql<{ id: number }>`select id from deferred`.execute(database.db)).rows).toEqual([{ id: 2 }]);
  });

  it("carries a transaction's BEGIN with its first statement: that statement is inside it, a failure rolls it back, an empty one leaves nothing open", async () => {
    await sql`create table carried (id int primary key)`.execute(database.db);
    await expect(
      database.db.transaction().execute(async (trx) => {
        await sql`insert into carried values (1)`.execute(trx);
        throw new Error('undo');
      }),
    ).rejects.toThrow('undo');
    await expect(
      database.db.transaction().execute(async (trx) => {
        await sql`insert into carried values (2), (2)`.execute(trx);
      }),
    ).rejects.toMatchObject({ code: '23505' });
    expect((await sql`select id from carried`.execute(database.db)).rows).toEqual([]);

    await database.db.transaction().execute(async () => {});
    await expect(database.db.transaction().execute(async () => Promise.reject(new Error('before any statement')))).rejects.toThrow('before any statement');
    // Nothing was left open: a statement outside a transaction commits on its own and a ROLLBACK cannot undo it.
    await sql`insert into carried values (3)`.execute(database.db);
    await sql`rollback`.execute(database.db);
    expect((await sql`select id from carried`.execute(database.db)).rows).toEqual([{ id: 3 }]);

    // A first statement that never reached the thread began nothing: the next one carries the BEGIN.
    await expect(
      database.db.transaction().execute(async (trx) => {
        await expect(sql`select ${{ toJSON: () => 1 }}::jsonb as refused`.execute(trx)).rejects.toThrow(/could not be sent/);
        await sql`insert into carried values (4)`.execute(trx);
        throw new Error('undo');
      }),
    ).rejects.toThrow('undo');
    expect((await sql`select id from carried`.execute(database.db)).rows).toEqual([{ id: 3 }]);

    const [first, second] = await database.db
      .transaction()
      .execute(async (trx) => [
        (await sql<{ xid: string }>`select pg_current_xact_id()::text as xid`.execute(trx)).rows[0]!.xid,
        (await sql<{ xid: string }>`select pg_current_xact_id()::text as xid`.execute(trx)).rows[0]!.xid,
      ]);
    expect(first).toBe(second);
  });

  it('turns a Buffer given for text into its text, as in process; refuses a value that cannot reach the thread, and goes on', async () => {
    const { rows } = await sql<{ t: string }>`select ${Buffer.from('abc')}::text as t`.execute(database.db);
    expect(rows).toEqual([{ t: 'abc' }]);
    const uncloneable = { toJSON: () => 1 };
    await expect(sql`select ${uncloneable}::jsonb`.execute(database.db)).rejects.toThrow(/could not be sent to the embedded database/);
    expect((await sql<{ one: number }>`select 1 as one`.execute(database.db)).rows).toEqual([{ one: 1 }]);
  });

  it('gives errors their SQLSTATE and fields, as PostgreSQL reported them', async () => {
    await sql`create table uniq (id int constraint uniq_pk primary key)`.execute(database.db);
    await sql`insert into uniq values (1)`.execute(database.db);
    const error = await sql`insert into uniq values (1)`.execute(database.db).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(Error);
    expect(error).toMatchObject({ code: '23505', constraint: 'uniq_pk', table: 'uniq', detail: 'Key (id)=(1) already exists.' });
    expect((error as Error).message).toMatch(/duplicate key value violates unique constraint "uniq_pk"/);
  });

  it('reports affected rows, and nulls round-trip', async () => {
    await sql`insert into t (id) values (${2}), (${3})`.execute(database.db);
    const updated = await database.db
      .updateTable('t' as never)
      .set({ flag: null } as never)
      .where('id' as never, 'in', [2, 3] as never)
      .executeTakeFirst();
    expect(Number(updated.numUpdatedRows)).toBe(2);
    const rows = (await sql<{ flag: boolean | null }>`select flag from t where id = any(${[2, 3]}::int[])`.execute(database.db)).rows;
    expect(rows).toEqual([{ flag: null }, { flag: null }]);
  });

  it('keeps working after errors: a failed statement is not cached and leaves the session usable', async () => {
    await expect(sql`insert into t (id) values (${1})`.execute(database.db)).rejects.toMatchObject({ code: '23505' });
    await expect(sql`selec nonsense`.execute(database.db)).rejects.toMatchObject({ code: '42601' });
    await expect(sql`selec nonsense`.execute(database.db)).rejects.toMatchObject({ code: '42601' });
    await expect(
      database.db.transaction().execute(async (trx) => {
        await sql`insert into t (id) values (${10})`.execute(trx);
        await sql`insert into t (id) values (${10})`.execute(trx);
      }),
    ).rejects.toMatchObject({ code: '23505' });
    const left = await sql<{ n: number }>`select count(*)::int as n from t where id = ${10}`.execute(database.db);
    expect(left.rows[0]!.n).toBe(0);
  });

  it('closes the least recently used statements beyond its bound and prepares them again when needed', async () => {
    for (let i = 0; i < 300; i++) {
      const { rows } = await sql<{ v: number }>`select ${i}::int + ${sql.lit(i)} as v`.execute(database.db);
      expect(rows[0]!.v).toBe(2 * i);
    }
    const { rows } = await sql<{ v: number }>`select ${5}::int + ${sql.lit(5)} as v`.execute(database.db);
    expect(rows[0]!.v).toBe(10);
    const prepared = await sql<{ n: number }>`select count(*)::int as n from pg_prepared_statements`.execute(database.db);
    expect(prepared.rows[0]!.n).toBeLessThanOrEqual(256);
  });

  it('reads rows by the description a statement was prepared with, and prepares it anew when its table changes', async () => {
    const db = database.db;
    await sql`create table shape (a int, b text)`.execute(db);
    await sql`insert into shape values (1, 'x')`.execute(db);
    const read = () => sql<Record<string, unknown>>`select * from shape`.execute(db);
    expect((await read()).rows).toEqual([{ a: 1, b: 'x' }]);
    expect((await read()).rows).toEqual([{ a: 1, b: 'x' }]);
    expect((await sql`insert into shape values (2, 'y')`.execute(db)).rows).toEqual([]);

    // Outside a transaction the statement runs again, prepared for the new shape.
    await sql`alter table shape add column c int default 7`.execute(db);
    expect((await read()).rows).toEqual([
      { a: 1, b: 'x', c: 7 },
      { a: 2, b: 'y', c: 7 },
    ]);

    // Inside one, PostgreSQL's error has aborted it: it fails, and the statement is prepared anew afterwards.
    await sql`alter table shape drop column b`.execute(db);
    await expect(db.transaction().execute(async (trx) => void (await sql`select * from shape`.execute(trx)))).rejects.toMatchObject({ code: '0A000' });
    expect((await read()).rows).toEqual([
      { a: 1, c: 7 },
      { a: 2, c: 7 },
    ]);
    // In a transaction too, now that it was prepared anew (not run again after failing).
    await db.transaction().execute(async (trx) => {
      await sql`insert into shape values (3, 7)`.execute(trx);
      expect((await sql`select * from shape`.execute(trx)).rows).toHaveLength(3);
    });
  });

  it("describes on every run the rows of statements PostgreSQL does not hold to one shape: a cursor's", () =>
    database.db.transaction().execute(async (trx) => {
      for (const [query, rows] of [
        [sql`select 1 as one`, [{ one: 1 }]],
        [sql`select 'hello'::text as greeting, 2 as two`, [{ greeting: 'hello', two: 2 }]],
      ] as const) {
        await sql`declare cur scroll cursor for ${query}`.execute(trx);
        expect((await sql`fetch all from cur`.execute(trx)).rows).toEqual(rows);
        await sql`move absolute 0 in cur`.execute(trx);
        expect((await sql`/* again */ fetch all from cur`.execute(trx)).rows).toEqual(rows);
        await sql`close cur`.execute(trx);
      }
    }));

  it('delivers notifications raised by its statements', async () => {
    const seen: string[] = [];
    const stop = await database.listen('dialect_test', {
      onNotify: () => seen.push('notified'),
      onListening: () => seen.push('listening'),
      onLost: () => seen.push('lost'),
    });
    await sql`select pg_notify('dialect_test', 'x')`.execute(database.db);
    expect(seen).toEqual(['listening', 'notified']);
    await stop();
  });
});
