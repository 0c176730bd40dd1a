import { Worker, type Transferable } from 'node:worker_threads';

/**
 * A small pool of worker threads for CPU-bound work (document parsing, local embedding), so that a hostile
 * or merely huge input can never stall the event loop that answers HTTP requests.
 *
 * Each task gets a deadline, counted from the moment a ready worker takes it (time spent queued behind other
 * tasks does not count). A task that runs past it, a worker that runs out of heap (`resourceLimits`), a worker
 * that dies, and a task whose signal aborts all end the same way: the worker is terminated (V8 stops it even
 * inside a tight loop), the task is rejected with a {@link WorkerFailure} saying which, and a fresh worker is
 * started for the next task. Workers start on demand and stay warm while idle (unref'd, so they never keep the
 * process alive).
 *
 * The worker side is adapters/outbound/workers/serve-tasks.ts.
 */

export type WorkerFailureKind = 'deadline' | 'memory' | 'crashed' | 'aborted' | 'closed';

/** The pool stopped a task (or never ran it): `kind` says why. */
export class WorkerFailure extends Error {
  override name = 'WorkerFailure';
  constructor(
    readonly kind: WorkerFailureKind,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** The task itself threw inside the worker: its error's name, message and own enumerable data. */
export class WorkerTaskError extends Error {
  override name = 'WorkerTaskError';
  constructor(
    readonly errorName: string,
    message: string,
    readonly data: Record<string, unknown> = {},
  ) {
    super(message);
  }
}

export interface WorkerPoolOptions {
  /** The worker's entry module (TypeScript: db/load-typescript.mjs registers tsx first). */
  script: URL;
  size: number;
  deadlineMs: number;
  /** V8 old-generation heap limit of each worker. */
  memoryMb: number;
}

export interface RunOptions {
  signal?: AbortSignal;
  /** Buffers moved (not copied) to the worker; they are unusable here afterwards. */
  transfer?: Transferable[];
}

export interface WorkerPoolStats {
  size: number;
  busy: number;
  queued: number;
  /** Workers started since the pool was made (replacements included). */
  started: number;
}

export interface WorkerPool {
  run<T>(task: unknown, options?: RunOptions): Promise<T>;
  stats(): WorkerPoolStats;
  /** Rejects queued and running tasks, terminates every worker. Idempotent. */
  close(): Promise<void>;
}

/** What a worker posts: once `ready` after loading, then one reply per task. */
export type WorkerMessage =
  | { ready: true }
  | { id: number; ok: true; value: unknown }
  | { id: number; ok: false; error: { name: string; message: string; data: Record<string, unknown> } };

interface Pending {
  id: number;
  task: unknown;
  transfer: Transferable[];
  signal: AbortSignal | undefined;
  onAbort: () => void;
  resolve(value: unknown): void;
  reject(error: Error): void;
}

interface Slot {
  worker: Worker;
  ready: boolean;
  running: Pending | undefined;
  timer: NodeJS.Timeout | undefined;
  heapWatch: NodeJS.Timeout | undefined;
}

/** Node 22.16+ and 24 can read a running worker's heap from outside; Node 20 cannot. */
type HeapReadable = Worker & { getHeapStatistics?: () => Promise<{ used_heap_size: number }> };

/** How often a busy worker's heap is read, and at what share of its limit it is stopped (see `watchHeap`). */
const HEAP_WATCH_MS = 100;
const HEAP_WATCH_SHARE = 0.85;

/** Registers tsx in the worker when its script is TypeScript (not in the precompiled build), then loads `workerData.script`. */
const BOOTSTRAP = new URL('../../../db/load-typescript.mjs', import.meta.url);

/**
 * Young generation: enough not to thrash the scavenger, small next to the old-generation limit. Parsing allocates
 * fast, so a worker's young generation fills to its limit and stays resident: 16 MB rather than 64 took ~45 MB off a
 * parsing worker's peak RSS at the same speed (bench:ingest's PDFs, 2 cores).
 */
const youngGenerationMb = (memoryMb: number) => Math.max(8, Math.min(16, Math.floor(memoryMb / 32)));

export function createWorkerPool(options: WorkerPoolOptions): WorkerPool {
  const { script, size, deadlineMs, memoryMb } = options;
  if (!Number.isInteger(size) || size < 1) throw new RangeError('size must be a positive integer');
  const slots: Array<Slot | undefined> = Array.from({ length: size }, () => undefined);
  const queue: Pending[] = [];
  let nextId = 1;
  let started = 0;
  let closed = false;

  const settle = (pending: Pending) => pending.signal?.removeEventListener('abort', pending.onAbort);

  function spawn(index: number): Slot {
    const worker = new Worker(BOOTSTRAP, {
      workerData: { script: script.href },
      // Not the parent's flags: `--import tsx` there would register tsx twice, vitest's are not for workers.
      execArgv: [],
      resourceLimits: { maxOldGenerationSizeMb: memoryMb, maxYoungGenerationSizeMb: youngGenerationMb(memoryMb) },
    });
    started++;
    worker.unref();
    const slot: Slot = { worker, ready: false, running: undefined, timer: undefined, heapWatch: undefined };
    slots[index] = slot;
    worker.on('message', (message: WorkerMessage) => {
      if ('ready' in message) {
        slot.ready = true;
        dispatch();
        return;
      }
      const pending = slot.running;
      if (!pending || pending.id !== message.id) return;
      finishTask(slot);
      settle(pending);
      if (message.ok) pending.resolve(message.value);
      else pending.reject(new WorkerTaskError(message.error.name, message.error.message, message.error.data));
      dispatch();
    });
    worker.on('error', (error: Error & { code?: string }) => {
      if (error.code === 'ERR_WORKER_OUT_OF_MEMORY')
        discard(slot, new WorkerFailure('memory', `the worker ran out of memory (limit ${memoryMb} MB)`, { cause: error }));
      else discard(slot, new WorkerFailure('crashed', `the worker failed: ${error.message}`, { cause: error }));
    });
    worker.on('exit', (code) => discard(slot, new WorkerFailure('crashed', `the worker exited (code ${code})`)));
    return slot;
  }

  /**
   * V8 stops a worker cleanly at its heap limit only when the limit is crossed by small steps: an allocation
   * that jumps well past it (one huge array's backing store, say) aborts the whole process instead (nodejs/node
   * issue 47224). Where the heap can be read from outside, a busy worker is stopped before it gets there.
   */
  function watchHeap(slot: Slot) {
    const read = (slot.worker as HeapReadable).getHeapStatistics?.bind(slot.worker);
    if (!read) return;
    const ceiling = memoryMb * 1024 * 1024 * HEAP_WATCH_SHARE;
    slot.heapWatch = setInterval(() => {
      // A reading belongs to the task running when it was asked for: a slow answer must not judge the next task.
      const task = slot.running;
      read().then(
        (heap) => {
          if (task && slot.running === task && heap.used_heap_size > ceiling)
            discard(slot, new WorkerFailure('memory', `the worker used more than ${Math.round(HEAP_WATCH_SHARE * 100)}% of its ${memoryMb} MB heap`));
        },
        () => {},
      );
    }, HEAP_WATCH_MS);
    slot.heapWatch.unref();
  }

  function finishTask(slot: Slot) {
    clearTimeout(slot.timer);
    clearInterval(slot.heapWatch);
    slot.timer = undefined;
    slot.heapWatch = undefined;
    slot.running = undefined;
    slot.worker.unref();
  }

  /**
   * Takes a slot's worker out of service, terminating it, and fails what it was doing. A worker that dies while
   * starting fails the first queued task instead: otherwise a worker that can never start would be restarted
   * for ever while tasks wait.
   */
  function discard(slot: Slot, failure: WorkerFailure) {
    const index = slots.indexOf(slot);
    if (index === -1) return;
    slots[index] = undefined;
    const pending = slot.running;
    const wasReady = slot.ready;
    if (pending) finishTask(slot);
    void slot.worker.terminate();
    const victim = pending ?? (wasReady ? undefined : queue.shift());
    if (victim) {
      settle(victim);
      victim.reject(wasReady || pending ? failure : new WorkerFailure(failure.kind, `the worker could not start: ${failure.message}`, { cause: failure }));
    }
    dispatch();
  }

  function dispatch() {
    if (closed) return;
    // Start no more workers than there are tasks waiting for one.
    let starting = slots.filter((s) => s && !s.ready).length;
    for (let i = 0; i < slots.length && queue.length > 0; i++) {
      const slot = slots[i];
      if (!slot) {
        if (starting < queue.length) {
          spawn(i);
          starting++;
        }
        continue;
      }
      if (!slot.ready || slot.running) continue;
      const pending = queue.shift()!;
      slot.running = pending;
      slot.worker.ref();
      slot.timer = setTimeout(() => discard(slot, new WorkerFailure('deadline', `the task ran longer than ${deadlineMs} ms`)), deadlineMs);
      watchHeap(slot);
      try {
        slot.worker.postMessage({ id: pending.id, task: pending.task }, pending.transfer);
      } catch (error) {
        // The task could not be cloned: nothing reached the worker, which stays usable.
        finishTask(slot);
        settle(pending);
        pending.reject(error as Error);
        i--;
      }
    }
  }

  return {
    run<T>(task: unknown, runOptions: RunOptions = {}): Promise<T> {
      const { signal, transfer = [] } = runOptions;
      return new Promise<T>((resolve, reject) => {
        if (closed) return reject(new WorkerFailure('closed', 'the worker pool is closed'));
        if (signal?.aborted) return reject(new WorkerFailure('aborted', 'the task was cancelled', { cause: signal.reason }));
        const pending: Pending = {
          id: nextId++,
          task,
          transfer,
          signal,
          onAbort: () => {
            const aborted = new WorkerFailure('aborted', 'the task was cancelled', { cause: signal?.reason });
            const queued = queue.indexOf(pending);
            if (queued !== -1) {
              queue.splice(queued, 1);
              settle(pending);
              reject(aborted);
              return;
            }
            const slot = slots.find((s) => s?.running === pending);
            if (slot) discard(slot, aborted);
          },
          resolve: resolve as (value: unknown) => void,
          reject,
        };
        signal?.addEventListener('abort', pending.onAbort, { once: true });
        queue.push(pending);
        dispatch();
      });
    },

    stats: () => ({
      size,
      busy: slots.filter((s) => s?.running).length,
      queued: queue.length,
      started,
    }),

    async close() {
      if (closed) return;
      closed = true;
      const failure = new WorkerFailure('closed', 'the worker pool is closed');
      for (const pending of queue.splice(0)) {
        settle(pending);
        pending.reject(failure);
      }
      const terminations: Array<Promise<number>> = [];
      for (let i = 0; i < slots.length; i++) {
        const slot = slots[i];
        if (!slot) continue;
        slots[i] = undefined;
        if (slot.running) {
          const pending = slot.running;
          finishTask(slot);
          settle(pending);
          pending.reject(failure);
        }
        terminations.push(slot.worker.terminate());
      }
      await Promise.all(terminations);
    },
  };
}
