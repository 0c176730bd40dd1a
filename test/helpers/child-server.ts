import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import postgres from 'postgres';
import { openPGlite, openPostgres, type Database } from '../../db/database.ts';
import { httpsCall, openApiContract, type RequestOptions, type TestResponse } from './test-app.ts';

/**
 * The real service as a child process, started the way `npm start` does (`node server/start.mjs`: the precompiled
 * build of server/build-service.mjs, one process, signals go straight to the server). It runs in its own process group, and
 * {@link ChildServer.crash} SIGKILLs the group, as in an OOM kill.
 */
export interface ChildServer {
  /** https://127.0.0.1:<port> */
  url: string;
  pid: number;
  /** Everything the child wrote to stdout and stderr so far (JSON log lines). */
  output(): string;
  request(method: string, path: string, options?: RequestOptions): Promise<TestResponse>;
  /** SIGKILL to the whole process group; resolves when the child has exited and no process of the group is left. */
  crash(): Promise<void>;
  /** SIGTERM to the server process (graceful shutdown); resolves with the exit code, SIGKILLs the group after `timeoutMs`. */
  stop(timeoutMs?: number): Promise<number | null>;
  /** True while the server process has not exited. */
  running(): boolean;
}

export interface ChildServerOptions {
  dataDir: string;
  /** Extra environment; PORT, HOST and DATA_DIR are set by the helper. DATABASE_URL and REDIS_URL are cleared unless given. */
  env?: Record<string, string>;
  startTimeoutMs?: number;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function groupAlive(pid: number): boolean {
  try {
    process.kill(-pid, 0);
    return true;
  } catch {
    return false;
  }
}

export async function startChildServer(options: ChildServerOptions): Promise<ChildServer> {
  const { NODE_OPTIONS: _nodeOptions, ...inherited } = process.env;
  const env: Record<string, string> = {
    ...(inherited as Record<string, string>),
    DATABASE_URL: '',
    REDIS_URL: '',
    LOG_LEVEL: 'info',
    ...options.env,
    // Port 0: the OS picks a free one, which the "listening" log line reports (no race on a guessed port).
    PORT: '0',
    HOST: '127.0.0.1',
    DATA_DIR: options.dataDir,
  };
  const child: ChildProcess = spawn(process.execPath, ['server/start.mjs'], {
    cwd: new URL('../..', import.meta.url).pathname,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  const pid = child.pid;
  if (pid === undefined) throw new Error('could not spawn the server');
  let output = '';
  child.stdout!.on('data', (c: Buffer) => (output += c.toString('utf8')));
  child.stderr!.on('data', (c: Buffer) => (output += c.toString('utf8')));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  let hasExited = false;
  void exited.then(() => (hasExited = true));

  const killGroup = async () => {
    if (groupAlive(pid)) process.kill(-pid, 'SIGKILL');
    await exited;
    const deadline = Date.now() + 5_000;
    while (groupAlive(pid)) {
      if (Date.now() > deadline) throw new Error(`process group ${pid} survived SIGKILL`);
      await sleep(20);
    }
  };

  const deadline = Date.now() + (options.startTimeoutMs ?? 30_000);
  let url: string | undefined;
  while (!url) {
    const line = output.split('\n').find((l) => l.includes('"msg":"listening"'));
    if (line) url = String(JSON.parse(line).url).replace('https://localhost:', 'https://127.0.0.1:');
    else if (hasExited || Date.now() > deadline) {
      await killGroup();
      throw new Error(`the server did not start:\n${output}`);
    } else await sleep(50);
  }
  const baseUrl = url;
  // Fetched now, while the child surely answers: a test may crash it before its first checked response.
  await openApiContract(baseUrl);

  return {
    url: baseUrl,
    pid,
    output: () => output,
    request: (method, path, requestOptions) => httpsCall(baseUrl, method, path, requestOptions),
    crash: killGroup,
    async stop(timeoutMs = 15_000) {
      if (hasExited) {
        await killGroup();
        return child.exitCode;
      }
      process.kill(pid, 'SIGTERM');
      let timer: ReturnType<typeof setTimeout> | undefined;
      const code = await Promise.race([exited, new Promise<'timeout'>((r) => (timer = setTimeout(() => r('timeout'), timeoutMs)))]);
      clearTimeout(timer);
      await killGroup(); // no-op when it exited by itself
      return code === 'timeout' ? null : code;
    },
    running: () => !hasExited,
  };
}

/** A scratch database for a child server: PGlite inside its DATA_DIR, or a new database on the DATABASE_URL server. */
export interface ChildStorage {
  /** Environment for the child (DATABASE_URL, REDIS_URL on PostgreSQL; nothing on PGlite). */
  env: Record<string, string>;
  /** Opens the database from this process. PGlite: only while no child runs on that data dir (one process per data dir), or on a copy. */
  open(dataDir: string): Promise<Database>;
  /** Runs `fn` on the database while no child runs: PGlite on a copy of the data directory (the original stays
   *  untouched for a restart; the copy is removed after), PostgreSQL directly. */
  inspect<T>(dataDir: string, fn: (database: Database) => Promise<T>): Promise<T>;
  drop(): Promise<void>;
}

async function withDatabase<T>(database: Database, fn: (database: Database) => Promise<T>): Promise<T> {
  try {
    return await fn(database);
  } finally {
    await database.close();
  }
}

export async function createChildStorage(prefix: string): Promise<ChildStorage> {
  const databaseUrl = process.env.DATABASE_URL;
  if (!databaseUrl) {
    const open = (dataDir: string) => openPGlite({ dataDir: join(dataDir, 'pglite') });
    return {
      env: {},
      open,
      async inspect(dataDir, fn) {
        const copy = mkdtempSync(join(tmpdir(), `${prefix}-copy-`));
        try {
          cpSync(join(dataDir, 'pglite'), join(copy, 'pglite'), { recursive: true });
          return await withDatabase(await open(copy), fn);
        } finally {
          rmSync(copy, { recursive: true, force: true });
        }
      },
      drop: async () => {},
    };
  }
  const name = `${prefix}_${randomBytes(5).toString('hex')}`;
  const admin = postgres(databaseUrl, { max: 1, onnotice: () => {} });
  await admin.unsafe(`create database ${name}`);
  const url = new URL(databaseUrl);
  url.pathname = `/${name}`;
  return {
    env: { DATABASE_URL: url.toString(), ...(process.env.REDIS_URL ? { REDIS_URL: process.env.REDIS_URL } : {}) },
    open: async () => openPostgres(url.toString(), 2),
    inspect: async (_dataDir, fn) => withDatabase(openPostgres(url.toString(), 2), fn),
    drop: async () => {
      await admin.unsafe(`drop database if exists ${name} with (force)`);
      await admin.end();
    },
  };
}
