import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { Worker } from 'node:worker_threads';
import type { StatementResult } from './pglite-session.ts';

/**
 * The embedded database in a thread of its own (db/pglite-worker.ts), seen from the request thread. Each call is a
 * message answered in order; the rows come back as plain data (bytea as Buffers again).
 */
export interface PGliteThreadOptions {
  dataDir?: string;
  /** A data directory's gzipped dump to start from (db/database.ts dumpPGlite). */
  loadDataDir?: ArrayBuffer;
  sharedBuffersMb: number;
  /** A bound on the thread's JavaScript heap (where a result's rows are built), in MB; Node's default when absent. */
  heapMb?: number;
}

type RequestBody =
  | { op: 'run'; sql: string; parameters: readonly unknown[]; begin?: boolean }
  | { op: 'listen'; channel: string; listener: number }
  | { op: 'unlisten'; listener: number }
  | { op: 'dump' }
  | { op: 'close' };

export type ThreadRequest = RequestBody & { id: number };

/** What PGlite would otherwise read and compile in every thread it starts in: its engine, initdb and base files. */
export interface EngineArtifacts {
  pgliteWasmModule: WebAssembly.Module;
  initdbWasmModule: WebAssembly.Module;
  fsBundle: ArrayBuffer;
}

let artifacts: Promise<EngineArtifacts> | undefined;

/**
 * Compiled once per process and handed to each database thread (a compiled module crosses to a worker without being
 * compiled again): compiling the 9 MB engine took about 3 s of every start, where in process PGlite compiled it once.
 */
function engineArtifacts(): Promise<EngineArtifacts> {
  artifacts ??= (async () => {
    const dist = dirname(createRequire(import.meta.url).resolve('@electric-sql/pglite'));
    const [engine, initdb, bundle] = await Promise.all(['pglite.wasm', 'initdb.wasm', 'pglite.data'].map((name) => readFile(join(dist, name))));
    const [pgliteWasmModule, initdbWasmModule] = await Promise.all([WebAssembly.compile(engine!), WebAssembly.compile(initdb!)]);
    return { pgliteWasmModule, initdbWasmModule, fsBundle: bundle!.buffer.slice(bundle!.byteOffset, bundle!.byteOffset + bundle!.byteLength) };
  })();
  artifacts.catch(() => {
    artifacts = undefined;
  });
  return artifacts;
}

interface ErrorData {
  name: string;
  message: string;
  fields: Record<string, string | number | boolean>;
}

export type ThreadReply =
  | { ready: true }
  | { failed: ErrorData }
  | { notify: number; payload: string }
  | { id: number; ok: true; value: unknown }
  | { id: number; ok: false; error: ErrorData };

export interface PGliteThread {
  /**
   * With `begin`, a BEGIN runs first in the same message (a transaction's first statement: one hop, not two). An
   * error with `transactionNotBegun` means no BEGIN ran (the message could not be sent, or the BEGIN failed).
   */
  run(sql: string, parameters: readonly unknown[], options?: { begin?: boolean }): Promise<StatementResult>;
  /** Resolves once listening, with the unsubscribe. */
  listen(channel: string, onNotify: (payload: string) => void): Promise<() => Promise<void>>;
  /** The data directory as a gzipped tarball. */
  dump(): Promise<Blob>;
  close(): Promise<void>;
  readonly closed: boolean;
  /** Settles if the thread stops on its own (out of memory, an engine abort), never after close(). */
  readonly stopped: Promise<Error>;
}

/** Registers tsx in the worker when its script is TypeScript (not in the precompiled build), then loads it. */
const BOOTSTRAP = new URL('./load-typescript.mjs', import.meta.url);
const SCRIPT = new URL('./pglite-worker.ts', import.meta.url);

/** An error of the database thread, with its SQLSTATE and other fields, as the caller would have had it in process. */
function toError(data: ErrorData): Error {
  const error = Object.assign(new Error(data.message), data.fields);
  Object.defineProperty(error, 'name', { value: data.name, enumerable: false, configurable: true, writable: true });
  return error;
}

/**
 * A view into a larger buffer (a pooled Buffer, a slice of a file) is posted as its whole buffer: such parameters
 * are copied to their own bytes first.
 */
function compact(value: unknown): unknown {
  return value instanceof Uint8Array && (value.byteOffset !== 0 || value.byteLength !== value.buffer.byteLength) ? new Uint8Array(value) : value;
}

export async function startPGliteThread(options: PGliteThreadOptions): Promise<PGliteThread> {
  const worker = new Worker(BOOTSTRAP, {
    workerData: { script: SCRIPT.href, options, artifacts: await engineArtifacts() },
    transferList: options.loadDataDir ? [options.loadDataDir] : [],
    // Not the parent's flags: `--import tsx` there would register tsx twice, vitest's are not for workers.
    execArgv: [],
    resourceLimits: options.heapMb ? { maxOldGenerationSizeMb: options.heapMb } : undefined,
  });
  const pending = new Map<number, { resolve(value: unknown): void; reject(error: Error): void }>();
  const listeners = new Map<number, (payload: string) => void>();
  let nextId = 0;
  let stopped: Error | undefined;
  let closed = false;
  let announceStop!: (error: Error) => void;
  const stoppedOnItsOwn = new Promise<Error>((resolve) => (announceStop = resolve));

  const started = new Promise<void>((resolve, reject) => {
    const stop = (error: Error) => {
      // The engine is gone (it failed to start, ran out of memory, or aborted): every waiting and later call fails.
      if (!stopped && !closed) announceStop(error);
      stopped ??= error;
      for (const { reject: fail } of pending.values()) fail(stopped);
      pending.clear();
      reject(stopped);
    };
    worker.on('error', (error) =>
      stop(
        new Error(
          (error as NodeJS.ErrnoException).code === 'ERR_WORKER_OUT_OF_MEMORY'
            ? 'the embedded database stopped: its thread ran out of memory'
            : `the embedded database stopped: ${error.message}`,
          { cause: error },
        ),
      ),
    );
    worker.on('exit', (code) => stop(new Error(`the embedded database stopped (thread exit code ${code})`)));
    worker.on('message', (reply: ThreadReply) => {
      if ('notify' in reply) listeners.get(reply.notify)?.(reply.payload);
      else if ('ready' in reply) resolve();
      else if ('failed' in reply) {
        reject(toError(reply.failed));
        void worker.terminate();
      } else {
        const waiting = pending.get(reply.id);
        pending.delete(reply.id);
        // Idle, the thread does not hold the process open (a listener alone must not); a call in flight does.
        if (pending.size === 0) worker.unref();
        if (!waiting) return;
        if (reply.ok) waiting.resolve(reply.value);
        else waiting.reject(toError(reply.error));
      }
    });
  });
  await started;
  worker.unref();

  function call<T>(request: RequestBody): Promise<T> {
    if (stopped) return Promise.reject(stopped);
    const id = ++nextId;
    try {
      // Parameters cross by structured clone: strings, numbers, booleans, bigints, Dates, Buffers, arrays and
      // plain objects; a function (a toJSON of its own) cannot, and is refused here rather than lost.
      worker.postMessage({ ...request, id });
    } catch (error) {
      const refused = new Error(`a value could not be sent to the embedded database: ${(error as Error).message}`, { cause: error });
      return Promise.reject(Object.assign(refused, { transactionNotBegun: true }));
    }
    if (pending.size === 0) worker.ref();
    return new Promise<T>((resolve, reject) => {
      pending.set(id, { resolve: resolve as (value: unknown) => void, reject });
    });
  }

  let nextListener = 0;
  return {
    async run(sql, parameters, options) {
      const result = await call<StatementResult>({ op: 'run', sql, parameters: parameters.map(compact), begin: options?.begin });
      for (const column of result.byteaColumns) {
        for (const row of result.rows) {
          const bytes = row[column];
          // Posted as Uint8Arrays; the callers get Buffers, as from postgres.js.
          if (bytes instanceof Uint8Array) row[column] = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
        }
      }
      return result;
    },
    async listen(channel, onNotify) {
      const listener = ++nextListener;
      listeners.set(listener, onNotify);
      try {
        await call({ op: 'listen', channel, listener });
      } catch (error) {
        listeners.delete(listener);
        throw error;
      }
      return async () => {
        listeners.delete(listener);
        if (!closed && !stopped) await call({ op: 'unlisten', listener });
      };
    },
    async dump() {
      return new Blob([await call<ArrayBuffer>({ op: 'dump' })]);
    },
    async close() {
      if (closed) return;
      closed = true;
      if (!stopped) await call({ op: 'close' }).catch(() => {});
      await worker.terminate();
    },
    get closed() {
      return closed || stopped !== undefined;
    },
    stopped: stoppedOnItsOwn,
  };
}
