import type { Logger } from '../../adapters/outbound/logger.ts';

/**
 * Per-instance indexes of knowledge bases held in memory, each valid for one version of its knowledge base's
 * content (the caller's version string). Invariants: an index is answered only for the exact version it was
 * built from, so it is never stale; one build runs per key at a time; the indexes together hold at most
 * `budget` units (the least recently used goes first, and one larger than the budget is not kept).
 */
export interface MemoryIndexes<T> {
  /** The index of `key` built from `version`, marked as most recently used; undefined when there is none. */
  get(key: string, version: string): T | undefined;
  /** Runs `build` unless one already runs for `key`; resolves when it (or the running one) has ended. */
  build(key: string, build: () => Promise<BuiltIndex<T> | undefined>): Promise<void>;
  /** Resolves when no build is running (tests and benchmarks wait for the indexes to be ready). */
  idle(): Promise<void>;
  /** No build starts any more, running ones stop at their next page; resolves when none runs (before the database closes). */
  close(): Promise<void>;
  /** Whether close() was called: a build checks it between pages. */
  readonly closed: boolean;
}

export interface BuiltIndex<T> {
  version: string;
  value: T;
  size: number;
}

export function createMemoryIndexes<T>(options: { budget: number; kind: string; logger: Pick<Logger, 'warn'> }): MemoryIndexes<T> {
  // Least recently used first: a Map keeps insertion order and a hit re-inserts.
  const held = new Map<string, BuiltIndex<T>>();
  const building = new Map<string, Promise<void>>();
  let total = 0;
  let closed = false;

  function keep(key: string, index: BuiltIndex<T>) {
    const old = held.get(key);
    if (old) total -= old.size;
    held.delete(key);
    if (index.size > options.budget) return;
    for (const [oldestKey, oldest] of held) {
      if (total + index.size <= options.budget) break;
      held.delete(oldestKey);
      total -= oldest.size;
    }
    held.set(key, index);
    total += index.size;
  }

  return {
    get(key, version) {
      const index = held.get(key);
      if (!index || index.version !== version) return undefined;
      held.delete(key);
      held.set(key, index);
      return index.value;
    },
    build(key, build) {
      const running = building.get(key);
      if (running) return running;
      if (closed) return Promise.resolve();
      const run = build()
        .then((built) => {
          if (built) keep(key, built);
        })
        .catch((error: unknown) => options.logger.warn(`${options.kind} index build failed`, { key, reason: String(error) }))
        .finally(() => building.delete(key));
      building.set(key, run);
      return run;
    },
    async idle() {
      while (building.size > 0) await Promise.all(building.values());
    },
    close() {
      closed = true;
      return this.idle();
    },
    get closed() {
      return closed;
    },
  };
}
