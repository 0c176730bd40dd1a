import { randomUUID } from 'node:crypto';
import { close, fdatasync, fsync, open, readFile, writeFile } from 'node:fs';
import { mkdir, rm } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';

// File descriptors through the callback API, not fs/promises' FileHandle: a durable write of an upload cost the
// request thread 68-95 µs through a FileHandle and 31-37 µs this way (1.5 KB files, eight at a time), and
// fs/promises' readFile is likewise the slower one.
const openFile = promisify(open);
/** With a descriptor: writes every byte, in as many calls as that takes. */
const writeAll = promisify(writeFile);
const flushData = promisify(fdatasync);
const flushAll = promisify(fsync);
const closeFile = promisify(close);
const readWhole = promisify(readFile);

/**
 * Uploaded originals, kept for re-processing. A directory by default; keys are opaque
 * (`<configId>/<uuid>`), never derived from client file names, so no path can escape the root.
 */
export interface BlobStore {
  put(prefix: string, bytes: Uint8Array): Promise<string>;
  get(key: string): Promise<Buffer>;
  delete(key: string): Promise<void>;
  deletePrefix(prefix: string): Promise<void>;
}

const SAFE_SEGMENT = /^[A-Za-z0-9-]{1,64}$/;

export interface DirectoryBlobStoreOptions {
  /**
   * Flush each new file and its folder entry to the disk before a put resolves (default). Off only where the
   * database that will name the file does not flush its own commits either (the embedded database): the row could
   * not outlive a power loss, so its file need not, and on a process crash both are in the operating system's
   * cache. Flushing there cost an upload four thread-pool calls and a disk flush for no guarantee.
   */
  flushToDisk?: boolean;
}

export function createDirectoryBlobStore(root: string, options: DirectoryBlobStoreOptions = {}): BlobStore {
  const flushToDisk = options.flushToDisk ?? true;
  const pathOf = (key: string) => {
    const segments = key.split('/');
    if (segments.length !== 2 || !segments.every((s) => SAFE_SEGMENT.test(s))) throw new Error('invalid blob key');
    return join(root, ...segments);
  };
  // Folders made, or being made, by this instance (each file system call costs the request thread a threadpool round
  // trip). Every put into a folder waits for the same making, so none is acknowledged before the folder's own entry
  // is on disk. One deleted behind our back is made again when a write finds it missing.
  const folders = new Map<string, Promise<void>>();
  const ensureFolder = (folder: string) => {
    let making = folders.get(folder);
    if (making === undefined) {
      const made = makeFolder(folder);
      made.catch(() => {
        if (folders.get(folder) === made) folders.delete(folder);
      });
      folders.set(folder, made);
      making = made;
    }
    return making;
  };
  const flushFolder = sharedFolderFlushes();
  const writeNew = async (path: string, bytes: Uint8Array) => {
    const folder = dirname(path);
    let making = ensureFolder(folder);
    await making;
    try {
      await writeNewFile(path, bytes, flushToDisk);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
      // Only the making this put relied on is dropped: another put may already be making the folder again (and
      // flushing its entry), which this one must wait for rather than replace with a making that finds it there.
      if (folders.get(folder) === making) folders.delete(folder);
      making = ensureFolder(folder);
      await making;
      await writeNewFile(path, bytes, flushToDisk);
    }
    // A write that succeeded in a folder another put has just made again (after finding it removed) must wait for
    // that making too: until it resolves, the folder's own entry in its parent may not be on disk.
    const current = folders.get(folder);
    if (current !== undefined && current !== making) await current;
    // The new name is durable once its folder is: without this a power loss could drop the entry of a file
    // whose upload was already acknowledged.
    if (flushToDisk) await flushFolder(folder);
  };
  const makeFolder = async (folder: string) => {
    const firstMade = await mkdir(folder, { recursive: true });
    if (firstMade === undefined || !flushToDisk) return;
    // Each folder made needs its entry flushed in its parent, from the first one made down to `folder`.
    const parents: string[] = [];
    for (let made = folder; made !== firstMade && made !== dirname(made); made = dirname(made)) parents.unshift(dirname(made));
    for (const parent of [dirname(firstMade), ...parents]) await syncFolder(parent);
  };
  return {
    async put(prefix, bytes) {
      const key = `${prefix}/${randomUUID()}`;
      const path = pathOf(key);
      // Written under its final name, with no temporary file and rename: the database learns the key only after
      // this resolves, so a crash mid-write leaves a file nothing refers to, as a temporary one would. It resolves
      // only once the bytes and the name are on disk (the database's commit that follows is durable, so must be
      // what it refers to). A failed write removes what it wrote.
      try {
        await writeNew(path, bytes);
      } catch (error) {
        await rm(path, { force: true });
        throw error;
      }
      return key;
    },
    get: async (key) => readWhole(pathOf(key)),
    async delete(key) {
      await rm(pathOf(key), { force: true });
    },
    async deletePrefix(prefix) {
      if (!SAFE_SEGMENT.test(prefix)) throw new Error('invalid blob prefix');
      folders.delete(join(root, prefix));
      await rm(join(root, prefix), { recursive: true, force: true });
    },
  };
}

/** A new file (`wx`: never one that exists), with its bytes flushed to the disk before it resolves when `flush`. */
async function writeNewFile(path: string, bytes: Uint8Array, flush: boolean) {
  const fd = await openFile(path, 'wx');
  try {
    await writeAll(fd, bytes);
    if (flush) await flushData(fd);
  } finally {
    await closeFile(fd);
  }
}

/**
 * A folder's flushes shared by the puts that wait at the same time (a group commit). A put needs a flush that starts
 * after its file was written, so it joins the next flush not yet started, which starts once the running one ends:
 * concurrent uploads into one knowledge base cost one or two flushes between them, not one each.
 */
function sharedFolderFlushes() {
  const next = new Map<string, Promise<void>>();
  const running = new Map<string, Promise<void>>();
  return (folder: string): Promise<void> => {
    const waiting = next.get(folder);
    if (waiting) return waiting;
    const previous = running.get(folder);
    const flush = (async () => {
      // Always yields first, so that `next` holds this flush before it can start and stop taking joiners.
      await previous?.catch(() => {});
      next.delete(folder);
      const started = syncFolder(folder);
      running.set(folder, started);
      try {
        await started;
      } finally {
        if (running.get(folder) === started) running.delete(folder);
      }
    })();
    next.set(folder, flush);
    return flush;
  };
}

/**
 * Where a folder cannot be opened or flushed at all (some platforms and network file systems refuse it), there is
 * nothing more to do, as PostgreSQL decides for its own folders; any other failure fails the write.
 */
const FOLDER_SYNC_UNSUPPORTED = new Set(['EISDIR', 'EACCES', 'EPERM', 'EINVAL', 'EBADF', 'ENOTSUP']);

/** Flushes a folder's entries (names made or removed in it) to the disk. */
async function syncFolder(folder: string) {
  let fd: number;
  try {
    fd = await openFile(folder, 'r');
  } catch (error) {
    if (FOLDER_SYNC_UNSUPPORTED.has((error as NodeJS.ErrnoException).code ?? '')) return;
    throw error;
  }
  try {
    await flushAll(fd);
  } catch (error) {
    if (!FOLDER_SYNC_UNSUPPORTED.has((error as NodeJS.ErrnoException).code ?? '')) throw error;
  } finally {
    await closeFile(fd);
  }
}
