import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import { afterAll, describe, expect, it } from 'vitest';
import { openPGlite } from './database.ts';

const root = mkdtempSync(join(tmpdir(), 'cis-pglite-dir-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('an embedded database in a data directory', () => {
  it('is created on first open (initdb in a child process, moved into place whole) and opened as it is afterwards', async () => {
    const dataDir = join(root, 'nested', 'pglite');
    // What an interrupted first start leaves behind: it is started over.
    mkdirSync(`${dataDir}.initdb-1-dead`, { recursive: true });
    writeFileSync(join(`${dataDir}.initdb-1-dead`, 'PG_VERSION'), 'half made');
    const first = await openPGlite({ dataDir });
    await sql`create table marker (id int)`.execute(first.db);
    const { rows } = await sql<{ setting: string }>`select setting from pg_settings where name = 'shared_buffers'`.execute(first.db);
    expect(Number(rows[0]!.setting) * 8).toBe(32 * 1024); // 8 kB pages
    await first.close();
    expect(readdirSync(join(root, 'nested')).sort()).toEqual(['pglite']);
    const again = await openPGlite({ dataDir, sharedBuffersMb: 16 });
    expect((await sql<{ n: number }>`select count(*)::int as n from marker`.execute(again.db)).rows[0]!.n).toBe(0);
    await again.close();
    // Two full starts of the engine, one with initdb in a child process: 13-14 s on Node 20 in CI, and once past the
    // default 30 s on Node 24 with other work on the machine.
  }, 90_000);

  it('refuses a folder that holds files but no database, and leaves them as they are', async () => {
    const dataDir = join(root, 'occupied');
    mkdirSync(dataDir);
    writeFileSync(join(dataDir, 'notes.txt'), 'mine');
    await expect(openPGlite({ dataDir })).rejects.toThrow(/holds no PGlite database/);
    expect(readdirSync(dataDir)).toEqual(['notes.txt']);
    expect(readdirSync(root).filter((entry) => entry.startsWith('occupied.initdb'))).toEqual([]);
  });

  it("fails to open a data directory PGlite cannot start from, with the engine's reason", async () => {
    const dataDir = join(root, 'broken');
    mkdirSync(dataDir);
    writeFileSync(join(dataDir, 'PG_VERSION'), '15\n');
    await expect(openPGlite({ dataDir })).rejects.toThrow('PGlite failed to initialize properly');
  });
});

describe('the embedded database thread', () => {
  it('stops cleanly when it dies (here: out of memory): waiting and later statements fail with the reason, and it says it stopped', async () => {
    const database = await openPGlite({ threadHeapMb: 96 });
    try {
      expect((await sql<{ one: number }>`select 1 as one`.execute(database.db)).rows).toEqual([{ one: 1 }]);
      // About 400 MB of rows, built in the thread's heap of 96 MB.
      const huge = sql`select repeat('x', 1000) || g as s from generate_series(1, 400000) g`.execute(database.db);
      await expect(huge).rejects.toThrow('the embedded database stopped: its thread ran out of memory');
      await expect(database.stopped).resolves.toBeInstanceOf(Error);
      await expect(database.ping()).rejects.toThrow('the embedded database stopped');
    } finally {
      await database.close();
    }
  }, 60_000);

  it('does not say it stopped when it was closed', async () => {
    const database = await openPGlite({});
    let stopped = false;
    void database.stopped!.then(() => (stopped = true));
    await database.close();
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(stopped).toBe(false);
  }, 60_000);
});
