import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeEach, describe, expect, it, vi } from 'vitest';

/** What reached the disk, in order: `data <file>` (fdatasync), `folder <path>` (fsync of a folder), `acked <key>`. */
const events: string[] = [];
/** Each fsync of a folder as it started, with the number of `events` before it (a `folder` event says when it ended). */
const flushStarts: Array<{ path: string; after: number }> = [];
/** Folders whose fsync is held until released (to let a concurrent put race it). */
const held = new Map<string, Promise<void>>();
/** Folder fsyncs that fail with EIO, by their number in `flushStarts` (1 is the first). */
const failing = new Set<number>();
/** Files (opened `wx`) closed so far. */
let filesClosed = 0;
/** Files opened `wx` so far, and waits to run before the Nth such open (1 is the first), to order two puts' opens. */
let filesOpened = 0;
const openGates = new Map<number, () => Promise<void>>();

// The store's descriptor calls (node:fs, callback style), recorded by the path each descriptor was opened with.
vi.mock('node:fs', async (importOriginal) => {
  const fs = await importOriginal<typeof import('node:fs')>();
  const paths = new Map<number, string>();
  const files = new Set<number>();
  type Done = (error: NodeJS.ErrnoException | null) => void;
  const open = (path: string, flags: string, done: (error: NodeJS.ErrnoException | null, fd: number) => void) => {
    const gate = flags === 'wx' ? openGates.get(++filesOpened) : undefined;
    void (gate?.() ?? Promise.resolve()).then(() =>
      fs.open(path, flags, (error, fd) => {
        if (!error) paths.set(fd, path);
        if (!error && flags === 'wx') files.add(fd);
        done(error, fd);
      }),
    );
  };
  const close = (fd: number, done: Done) => {
    const file = files.delete(fd);
    paths.delete(fd);
    fs.close(fd, (error) => {
      if (file) filesClosed++;
      done(error);
    });
  };
  const fsync = (fd: number, done: Done) => {
    const path = paths.get(fd)!;
    flushStarts.push({ path, after: events.length });
    const fails = failing.has(flushStarts.length);
    void (held.get(path) ?? Promise.resolve()).then(() =>
      fails
        ? done(Object.assign(new Error(`EIO: i/o error, fsync '${path}'`), { code: 'EIO' }))
        : fs.fsync(fd, (error) => {
            if (!error) events.push(`folder ${path}`);
            done(error);
          }),
    );
  };
  const fdatasync = (fd: number, done: Done) =>
    fs.fdatasync(fd, (error) => {
      if (!error) events.push(`data ${paths.get(fd)}`);
      done(error);
    });
  return { ...fs, default: { ...fs, open, close, fsync, fdatasync }, open, close, fsync, fdatasync };
});

const { createDirectoryBlobStore } = await import('./blob-store.ts');

const base = mkdtempSync(join(tmpdir(), 'cis-blobs-durable-'));
afterAll(() => rmSync(base, { recursive: true, force: true }));
beforeEach(() => {
  events.length = 0;
  flushStarts.length = 0;
  held.clear();
  failing.clear();
  filesClosed = 0;
  filesOpened = 0;
  openGates.clear();
});

const tick = () => new Promise((resolve) => setTimeout(resolve, 1));

const prefix = '7d0c1b9e-0e55-4a4f-8f3c-1f4bb1f0a001';

/** A store whose prefix folder was made by one put, then removed behind its back; flushes of `root` are held. */
async function storeWithRemovedFolder(name: string) {
  const root = join(base, name);
  const store = createDirectoryBlobStore(root);
  await store.put(prefix, new Uint8Array([0]));
  rmSync(join(root, prefix), { recursive: true });
  let release!: () => void;
  held.set(root, new Promise<void>((resolve) => (release = resolve)));
  return { root, store, release };
}

describe('directory blob store: what is on disk when a put resolves', () => {
  it("flushes the file, its folder, and every new folder's entry in its parent, before resolving", async () => {
    const root = join(base, 'new', 'root');
    const store = createDirectoryBlobStore(root);
    const key = await store.put(prefix, new Uint8Array([1, 2, 3]));
    events.push(`acked ${key}`);
    const file = join(root, key);
    expect(events).toEqual([
      `folder ${base}`, // 'new' was made in base
      `folder ${join(base, 'new')}`, // 'root' in 'new'
      `folder ${root}`, // the prefix folder in root
      `data ${file}`,
      `folder ${join(root, prefix)}`, // the file's name in its folder
      `acked ${key}`,
    ]);
    events.length = 0;
    const second = await store.put(prefix, new Uint8Array([4]));
    events.push(`acked ${second}`);
    expect(events).toEqual([`data ${join(root, second)}`, `folder ${join(root, prefix)}`, `acked ${second}`]);
  });

  it('a put racing the first one into a new folder is not acknowledged before that folder is on disk', async () => {
    const root = join(base, 'racing');
    const store = createDirectoryBlobStore(root);
    let release!: () => void;
    held.set(
      join(base, 'racing'),
      new Promise<void>((resolve) => {
        release = resolve;
      }),
    );
    const put = (bytes: Uint8Array) =>
      store.put(prefix, bytes).then((key) => {
        events.push(`acked ${key}`);
        return key;
      });
    const first = put(new Uint8Array([1]));
    // The second starts once the first has made the folder and waits on its parent's flush.
    while (!existsSync(join(root, prefix))) await new Promise((resolve) => setTimeout(resolve, 1));
    const second = put(new Uint8Array([2]));
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(events.filter((e) => e.startsWith('acked'))).toEqual([]);
    release();
    const keys = await Promise.all([first, second]);
    const folderSynced = events.indexOf(`folder ${root}`);
    expect(folderSynced).toBeGreaterThanOrEqual(0);
    for (const key of keys) expect(events.indexOf(`acked ${key}`)).toBeGreaterThan(folderSynced);
    expect(events.filter((e) => e === `folder ${root}`)).toHaveLength(1);
  });

  it('puts waiting at the same time share the next flush of their folder, which starts after their files were written', async () => {
    const root = join(base, 'grouped');
    const store = createDirectoryBlobStore(root);
    const folder = join(root, prefix);
    await store.put(prefix, new Uint8Array([0])); // the folder exists: only the file's flushes are left
    let release!: () => void;
    held.set(folder, new Promise<void>((resolve) => (release = resolve)));
    events.length = 0;
    flushStarts.length = 0;
    const put = (bytes: Uint8Array) =>
      store.put(prefix, bytes).then((key) => {
        events.push(`acked ${key}`);
        return key;
      });

    const first = put(new Uint8Array([1]));
    while (flushStarts.length === 0) await new Promise((resolve) => setTimeout(resolve, 1));
    // The first one's flush is running (held): these three were written after it started, so it cannot cover them.
    const later = [put(new Uint8Array([2])), put(new Uint8Array([3])), put(new Uint8Array([4]))];
    // Each of them asks for its flush once its file is closed.
    while (filesClosed < 4) await tick();
    await new Promise((resolve) => setImmediate(resolve));
    expect(flushStarts.map((f) => f.path)).toEqual([folder]);
    held.delete(folder);
    release();
    const [firstKey, ...laterKeys] = await Promise.all([first, ...later]);

    const flushes = events.flatMap((e, i) => (e === `folder ${folder}` ? [i] : []));
    expect(flushes).toHaveLength(2); // four puts, two flushes
    expect(events.indexOf(`acked ${firstKey}`)).toBeGreaterThan(flushes[0]!);
    expect(flushStarts.map((f) => f.path)).toEqual([folder, folder]);
    for (const key of laterKeys) {
      expect(events.indexOf(`data ${join(root, key)}`)).toBeLessThan(flushStarts[1]!.after);
      expect(events.indexOf(`acked ${key}`)).toBeGreaterThan(flushes[1]!);
    }
  });

  it('a failed flush fails the puts that shared it and removes their files; the next put gets a flush of its own', async () => {
    const root = join(base, 'failing');
    const store = createDirectoryBlobStore(root);
    const folder = join(root, prefix);
    await store.put(prefix, new Uint8Array([0]));
    let release!: () => void;
    held.set(folder, new Promise<void>((resolve) => (release = resolve)));
    flushStarts.length = 0;
    filesClosed = 0;
    failing.add(2);

    const first = store.put(prefix, new Uint8Array([1]));
    while (flushStarts.length === 0) await tick();
    const shared = [store.put(prefix, new Uint8Array([2])), store.put(prefix, new Uint8Array([3]))];
    const settled = Promise.allSettled(shared);
    while (filesClosed < 3) await tick();
    held.delete(folder);
    release();
    const firstKey = await first;
    expect((await settled).map((r) => (r.status === 'rejected' ? (r.reason as NodeJS.ErrnoException).code : r.status))).toEqual(['EIO', 'EIO']);
    expect(flushStarts.map((f) => f.path)).toEqual([folder, folder]);
    expect(readdirSync(folder)).toHaveLength(2); // the one before, and the first of these; the two that failed are gone
    expect(readdirSync(folder)).toContain(firstKey.split('/')[1]);

    const next = await store.put(prefix, new Uint8Array([4]));
    expect(flushStarts).toHaveLength(3);
    expect(readdirSync(folder)).toContain(next.split('/')[1]);
  });

  it('puts that find their folder removed behind the store both wait for its entry to be flushed again', async () => {
    const { root, store, release } = await storeWithRemovedFolder('removed');
    const acked: string[] = [];
    const puts = [1, 2].map((n) => store.put(prefix, new Uint8Array([n])).then((key) => void acked.push(key)));
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(acked).toEqual([]); // the folder made again is not on disk until its entry in root is flushed
    held.delete(root);
    release();
    await Promise.all(puts);
    expect(acked).toHaveLength(2);
  });

  it('a put whose file opens after another put has made its removed folder again waits for that folder to be flushed', async () => {
    const { root, store, release } = await storeWithRemovedFolder('remade');
    filesOpened = 0;
    flushStarts.length = 0;
    // The second put's file opens only once the first has found the folder missing, made it again and started
    // flushing its entry in root (held): the second's open then succeeds without ever seeing the folder missing.
    openGates.set(2, async () => {
      while (!flushStarts.some((f) => f.path === root)) await tick();
    });
    const acked: number[] = [];
    const puts = [1, 2].map((n) => store.put(prefix, new Uint8Array([n])).then(() => void acked.push(n)));
    while (filesClosed < 2) await tick();
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(acked).toEqual([]); // neither is acknowledged while the folder's entry in root is not on disk
    held.delete(root);
    release();
    await Promise.all(puts);
    expect(acked.sort()).toEqual([1, 2]);
  });

  it('without flushToDisk (a database that does not flush its commits), writes the file and its folders and flushes nothing', async () => {
    const root = join(base, 'unflushed', 'root');
    const store = createDirectoryBlobStore(root, { flushToDisk: false });
    const keys = [await store.put(prefix, new Uint8Array([1, 2, 3])), await store.put(prefix, new Uint8Array([4]))];
    expect(events).toEqual([]);
    expect(flushStarts).toEqual([]);
    expect(readFileSync(join(root, keys[0]!))).toEqual(Buffer.from([1, 2, 3]));
    expect(await store.get(keys[1]!)).toEqual(Buffer.from([4]));
    expect(filesClosed).toBe(2);
  });
});
