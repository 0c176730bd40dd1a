import { createHash } from 'node:crypto';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { openPGlite, type Database } from './database.ts';

/** The dialect runs named prepared statements over PGlite's wire protocol; it must behave as PGlite's query(). */
let database: Database;

beforeAll(async () => {
  database = await openPGlite({});
  await sql`create table t (id int primary key, body jsonb, at timestamptz, bytes bytea, tags text[], flag boolean, n numeric, big bigint)`.execute(
    database.db,
  );
}, 60_000);

afterAll(async () => {
  await database?.close();
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
    await sql`insert into t values (${row.id}, ${row.body}, ${row.at}, ${row.bytes}, ${row.tags}, ${row.flag}, ${row.n}, ${row.big})`.execute(database.db);
    const ours = (await sql<Record<string, unknown>>`select * from t where id = ${1}`.execute(database.db)).rows[0];
    const theirs = (await database.pglite!.query<Record<string, unknown>>('select * from t where id = $1', [1])).rows[0];
    // bytea is ours to decode (a Buffer, as postgres.js gives it; query() makes a plain Uint8Array of the same bytes).
    expect(ours!.bytes).toBeInstanceOf(Uint8Array);
    expect({ ...ours, bytes: new Uint8Array(ours!.bytes as Uint8Array) }).toEqual(theirs);
    expect(ours).toMatchObject({ id: 1, body: { a: [1, 'two'], b: null }, at, tags: row.tags, flag: true });
    expect(Buffer.from(ours!.bytes as Uint8Array)).toEqual(row.bytes);
  });

  it('sends bytes as they are and reads them back: every byte value, empty, large, and as PostgreSQL sees them', async () => {
    const every = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
    const large = Buffer.from(Array.from({ length: 300_000 }, (_, i) => (i * 7919) % 251));
    // PGlite's own bytea serialiser must not be used: the bytes travel in the binary format.
    const serializers = database.pglite!.serializers as Record<number, (value: unknown) => string>;
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
      await sql`insert into t (id, bytes) values (${id}, ${bytes})`.execute(database.db);
      const { rows } = await sql<{ bytes: Uint8Array; length: number; md5: string }>`
        select bytes, length(bytes) as length, md5(bytes) as md5 from t where id = ${id}`.execute(database.db);
      expect(Buffer.from(rows[0]!.bytes).equals(Buffer.from(bytes))).toBe(true);
      expect(rows[0]!.length).toBe(bytes.length);
      expect(rows[0]!.md5).toBe(createHash('md5').update(bytes).digest('hex'));
    }
  });

  it('a long run of statements lets the event loop turn: other work is not held until the run ends', async () => {
    // Without pauses, statements chained one after another settle without any I/O, so nothing else would run.
    let turns = 0;
    const tick = () => {
      turns++;
      if (running) setImmediate(tick);
    };
    let running = true;
    setImmediate(tick);
    const started = performance.now();
    let statements = 0;
    while (performance.now() - started < 300) {
      await sql`select count(*) from generate_series(1, 2000)`.execute(database.db);
      statements++;
    }
    running = false;
    expect(statements).toBeGreaterThan(1);
    // Pauses during the run (about every 20 ms of work; fewer on a loaded machine), where without them there is none.
    expect(turns).toBeGreaterThanOrEqual(2);
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
