import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { cpSync, existsSync, mkdirSync, readdirSync, renameSync, rmSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { connect as connectTcp, type Socket } from 'node:net';
import { Kysely, sql } from 'kysely';
import { PostgresJSDialect } from 'kysely-postgres-js';
import postgres from 'postgres';
import { PGliteDialect } from './pglite-dialect.ts';
import { startPGliteThread } from './pglite-thread.ts';
import type { DB } from './types.ts';

export interface Database {
  db: Kysely<DB>;
  /** The embedded database's data directory as a gzipped tarball (kind 'pglite' only), taken between transactions. */
  dumpDataDir?(): Promise<Blob>;
  kind: 'pglite' | 'postgres';
  /** Round-trips to the database; throws when it is unreachable. */
  ping(): Promise<void>;
  /**
   * Settles with the reason if the database can no longer be used and will not come back by itself (the embedded
   * database's thread died); absent for PostgreSQL, whose connections are re-established.
   */
  stopped?: Promise<Error>;
  /** Subscribes to NOTIFY on `channel`; resolves once listening, with the unsubscribe. */
  listen(channel: string, listener: ChangeListener): Promise<() => Promise<void>>;
  close(): Promise<void>;
}

export interface ChangeListener {
  /** `payload`: what the notifying statement said ('' when nothing). */
  onNotify(payload: string): void;
  /** Listening (again): every notification committed from now on arrives. */
  onListening(): void;
  /** The listening connection was lost: notifications may be missed until the next onListening. */
  onLost(): void;
}

function wrap(db: Kysely<DB>, kind: Database['kind'], listen: Database['listen'], embedded?: Pick<Database, 'stopped' | 'dumpDataDir'>): Database {
  return {
    db,
    kind,
    ...embedded,
    ping: async () => {
      await sql`select 1`.execute(db);
    },
    listen,
    close: () => db.destroy(),
  };
}

const LISTEN_RETRY_MIN_MS = 500;
const LISTEN_RETRY_MAX_MS = 30_000;
const CONNECT_TIMEOUT_MS = 30_000;

/**
 * postgres.js's sockets leave Nagle's algorithm on, so a statement written in more than one TCP segment (a chat
 * turn with its sources, a batch of chunks, on a real network) can wait for the server's delayed ACK, up to
 * 40 ms; libpq sets TCP_NODELAY, and so do these. postgres.js takes a custom socket already connected; several
 * hosts are tried in turn.
 */
function noDelaySocket() {
  let next = 0;
  return (options: { host: string[]; port: number[]; path?: string }): Promise<Socket> =>
    new Promise((resolve, reject) => {
      const index = next++ % Math.max(1, options.host.length);
      const socket = options.path
        ? connectTcp({ path: options.path })
        : connectTcp({ host: options.host[index], port: options.port[index] ?? options.port[0] ?? 5432, noDelay: true });
      socket.setTimeout(CONNECT_TIMEOUT_MS, () => socket.destroy(new Error(`could not connect to PostgreSQL within ${CONNECT_TIMEOUT_MS} ms`)));
      socket.once('error', reject);
      socket.once('connect', () => {
        socket.setTimeout(0);
        socket.off('error', reject);
        resolve(socket);
      });
    });
}

/** PostgreSQL through postgres.js (production and the second CI pass). */
export function openPostgres(url: string, maxConnections = 10): Database {
  // `socket` is a documented postgres.js option that its type declarations lack.
  const client = postgres(url, { max: maxConnections, onnotice: () => {}, socket: noDelaySocket() } as postgres.Options<Record<string, never>>);
  return wrap(new Kysely<DB>({ dialect: new PostgresJSDialect({ postgres: client }) }), 'postgres', (channel, listener) =>
    listenPostgres(url, channel, listener),
  );
}

/**
 * A dedicated connection per subscription (postgres.js's own listen() reconnects without telling anyone,
 * and a cache must know when it may have missed a notification): on loss the listener hears onLost, and
 * LISTEN is issued again with backoff until it succeeds.
 */
async function listenPostgres(url: string, channel: string, listener: ChangeListener): Promise<() => Promise<void>> {
  let stopped = false;
  let retry: NodeJS.Timeout | undefined;
  let delay = LISTEN_RETRY_MIN_MS;
  // `onnotify` is the option postgres.js's own listen() is built on; it and `socket` are missing from its types.
  const options = {
    socket: noDelaySocket(),
    max: 1,
    max_lifetime: null,
    fetch_types: false,
    onnotice: () => {},
    onnotify: (name: string, payload: string) => {
      if (name === channel) listener.onNotify(payload);
    },
    onclose: () => {
      if (stopped) return;
      listener.onLost();
      scheduleRetry();
    },
  };
  const client = postgres(url, options as postgres.Options<Record<string, never>>);
  const subscribe = async () => {
    await client`listen ${client(channel)}`;
    delay = LISTEN_RETRY_MIN_MS;
    listener.onListening();
  };
  function scheduleRetry() {
    if (stopped || retry) return;
    retry = setTimeout(() => {
      retry = undefined;
      subscribe().catch(() => {
        delay = Math.min(delay * 2, LISTEN_RETRY_MAX_MS);
        scheduleRetry();
      });
    }, delay);
    retry.unref();
  }
  await subscribe();
  return async () => {
    stopped = true;
    clearTimeout(retry);
    await client.end({ timeout: 1 });
  };
}

/** PostgreSQL's buffer pool inside PGlite, in MB, unless the caller sets it (the service: PGLITE_SHARED_BUFFERS_MB). */
const DEFAULT_SHARED_BUFFERS_MB = 32;
const INITDB_SCRIPT = fileURLToPath(new URL('./pglite-initdb.mjs', import.meta.url));
const INITDB_TIMEOUT_MS = 120_000;

const BUILD_SUFFIX = '.initdb-';

/**
 * Runs initdb for a new data directory in a short-lived child process (see pglite-initdb.mjs for why), in a folder
 * of its own beside it that is moved into place when complete: a start stopped midway leaves no half-made
 * directory that the next start would take for a database (it starts over). Folders left by such starts are
 * removed first; an orphaned child still writing into one then fails, and never writes into ours.
 */
async function initialiseDataDir(dataDir: string): Promise<void> {
  const parent = dirname(dataDir);
  const stale = `${basename(dataDir)}${BUILD_SUFFIX}`;
  for (const entry of readdirSync(parent)) if (entry.startsWith(stale)) rmSync(join(parent, entry), { recursive: true, force: true });
  const building = `${dataDir}${BUILD_SUFFIX}${process.pid}-${randomBytes(4).toString('hex')}`;
  try {
    await new Promise<void>((resolve, reject) => {
      execFile(process.execPath, [INITDB_SCRIPT, building], { timeout: INITDB_TIMEOUT_MS, maxBuffer: 1024 * 1024 }, (error, _stdout, stderr) =>
        error ? reject(new Error(`creating the PGlite data directory ${dataDir} failed: ${stderr.trim().slice(-500) || error.message}`)) : resolve(),
      );
    });
    moveIntoPlace(building, dataDir);
  } finally {
    rmSync(building, { recursive: true, force: true });
  }
}

/**
 * rename() replaces an empty directory. Where it cannot (the data directory is a mount point of its own, or on
 * another file system) the files are copied in, PG_VERSION last, since its presence is what marks a database.
 * A directory holding other files but no database is for its owner to look at, not to overwrite.
 */
function moveIntoPlace(building: string, dataDir: string) {
  try {
    renameSync(building, dataDir);
    return;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOTEMPTY' || code === 'EEXIST' || (existsSync(dataDir) && readdirSync(dataDir).length > 0)) {
      throw new Error(`${dataDir} is not empty but holds no PGlite database (no PG_VERSION): move it away, or set DATA_DIR elsewhere`);
    }
    if (code !== 'EXDEV' && code !== 'EBUSY' && code !== 'EPERM') throw error;
  }
  mkdirSync(dataDir, { recursive: true });
  for (const entry of readdirSync(building)) {
    if (entry !== 'PG_VERSION') cpSync(join(building, entry), join(dataDir, entry), { recursive: true });
  }
  cpSync(join(building, 'PG_VERSION'), join(dataDir, 'PG_VERSION'));
}

/**
 * Embedded PGlite in a data directory (the zero-setup default). Never open one directory from two processes.
 * `sharedBuffersMb` sizes PostgreSQL's buffer pool (PGlite's own default is 128 MB, most of an idle service's
 * memory); the operating system's file cache still holds what the pool does not.
 */
export async function openPGlite(options: { dataDir?: string; loadDataDir?: Blob; sharedBuffersMb?: number; threadHeapMb?: number }): Promise<Database> {
  if (options.dataDir) {
    if (!options.loadDataDir && !existsSync(join(options.dataDir, 'PG_VERSION'))) {
      mkdirSync(dirname(options.dataDir), { recursive: true });
      await initialiseDataDir(options.dataDir);
    }
    mkdirSync(options.dataDir, { recursive: true });
  }
  const pglite = await startPGliteThread({
    dataDir: options.dataDir,
    loadDataDir: options.loadDataDir ? await options.loadDataDir.arrayBuffer() : undefined,
    sharedBuffersMb: options.sharedBuffersMb ?? DEFAULT_SHARED_BUFFERS_MB,
    heapMb: options.threadHeapMb,
  });
  const dialect = new PGliteDialect(pglite);
  const db = new Kysely<DB>({ dialect });
  // One session: notifications arrive before the notifying statement's result, and are never lost.
  // LISTEN and UNLISTEN take a turn as a transaction does, so they never land inside another caller's transaction.
  const listen = async (channel: string, listener: ChangeListener) => {
    const unlisten = await dialect.alone(() => pglite.listen(channel, (payload) => listener.onNotify(payload)));
    listener.onListening();
    return async () => {
      if (!pglite.closed) await dialect.alone(() => unlisten());
    };
  };
  return wrap(db, 'pglite', listen, { stopped: pglite.stopped, dumpDataDir: () => dialect.alone(() => pglite.dump()) });
}

/** A gzipped tarball of a PGlite data directory; openPGlite({ loadDataDir }) starts from it. */
export async function dumpPGlite(database: Database): Promise<Blob> {
  if (!database.dumpDataDir) throw new Error('not a PGlite database');
  return database.dumpDataDir();
}
