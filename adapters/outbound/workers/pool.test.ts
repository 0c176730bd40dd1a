import { afterEach, describe, expect, it, vi } from 'vitest';
import type { ProbeTask } from '../../../test/helpers/pool-probe-worker.ts';
import { createWorkerPool, WorkerFailure, WorkerTaskError, type WorkerPool, type WorkerPoolOptions } from './pool.ts';

const PROBE = new URL('../../../test/helpers/pool-probe-worker.ts', import.meta.url);

describe('worker pool', () => {
  const pools: WorkerPool[] = [];
  const makePool = (options: Partial<Omit<WorkerPoolOptions, 'script'>> = {}) => {
    const pool = createWorkerPool({ script: PROBE, size: 1, deadlineMs: 10_000, memoryMb: 64, ...options });
    pools.push(pool);
    return pool;
  };
  const run = <T>(pool: WorkerPool, task: ProbeTask, signal?: AbortSignal) => pool.run<T>(task, { signal });
  const failureOf = (promise: Promise<unknown>) =>
    promise.then(
      () => expect.unreachable('the task should have failed'),
      (error: unknown) => error,
    );

  afterEach(async () => {
    await Promise.all(pools.splice(0).map((p) => p.close()));
  });

  it('runs tasks in one warm worker, and moves transferred buffers', async () => {
    const pool = makePool();
    expect(pool.stats().started).toBe(0);
    expect(await run(pool, { type: 'echo', value: { a: [1, 'two'] } })).toEqual({ a: [1, 'two'] });
    const bytes = await run<Uint8Array>(pool, { type: 'bytes', length: 1024 });
    expect(bytes).toBeInstanceOf(Uint8Array);
    expect(bytes.length).toBe(1024);
    expect(bytes[1023]).toBe(7);
    expect(pool.stats()).toEqual({ size: 1, busy: 0, queued: 0, started: 1 });
  });

  it("returns a task's own error with its name and data, and keeps the worker", async () => {
    const pool = makePool();
    const thread = await run<number>(pool, { type: 'thread' });
    const error = await failureOf(run(pool, { type: 'throw', message: 'bad input' }));
    expect(error).toBeInstanceOf(WorkerTaskError);
    expect(error).toMatchObject({ errorName: 'ProbeError', message: 'bad input', data: { detail: 'kept' } });
    expect(await run<number>(pool, { type: 'thread' })).toBe(thread);
    expect(pool.stats().started).toBe(1);
  });

  it('stops a task that runs past its deadline and replaces the worker', async () => {
    const pool = makePool({ deadlineMs: 500 });
    const thread = await run<number>(pool, { type: 'thread' });
    const error = await failureOf(run(pool, { type: 'spin' }));
    expect(error).toBeInstanceOf(WorkerFailure);
    expect(error).toMatchObject({ kind: 'deadline' });
    const next = await run<number>(pool, { type: 'thread' });
    expect(next).not.toBe(thread);
    expect(pool.stats().started).toBe(2);
  });

  it('does not count time spent queued against the deadline', async () => {
    const pool = makePool({ deadlineMs: 2_000 });
    await run(pool, { type: 'echo', value: 'warm' });
    // The second task waits for the first, so it finishes well after 2 s from its submission.
    const results = await Promise.all([run(pool, { type: 'sleep', ms: 1_200 }), run(pool, { type: 'sleep', ms: 1_200 })]);
    expect(results).toEqual(['slept', 'slept']);
    expect(pool.stats().started).toBe(1);
  });

  it('fails a task whose worker runs out of heap, and the next task runs in a new worker', async () => {
    const pool = makePool({ memoryMb: 48 });
    const error = await failureOf(run(pool, { type: 'allocate' }));
    expect(error).toBeInstanceOf(WorkerFailure);
    expect(error).toMatchObject({ kind: 'memory' });
    expect(await run(pool, { type: 'echo', value: 'alive' })).toBe('alive');
    expect(pool.stats().started).toBe(2);
  });

  it('fails a task whose worker exits, and replaces it', async () => {
    const pool = makePool();
    const error = await failureOf(run(pool, { type: 'exit', code: 3 }));
    expect(error).toBeInstanceOf(WorkerFailure);
    expect(error).toMatchObject({ kind: 'crashed' });
    expect((error as Error).message).toContain('code 3');
    expect(await run(pool, { type: 'echo', value: 'alive' })).toBe('alive');
  });

  it('cancels a running task by terminating its worker, and a queued one without touching the running one', async () => {
    const pool = makePool();
    await run(pool, { type: 'echo', value: 'warm' });
    const running = new AbortController();
    const spinning = failureOf(run(pool, { type: 'spin' }, running.signal));
    const queued = new AbortController();
    const waiting = failureOf(run(pool, { type: 'echo', value: 'never' }, queued.signal));
    const afterwards = run(pool, { type: 'echo', value: 'after' });
    queued.abort();
    expect(await waiting).toMatchObject({ kind: 'aborted' });
    expect(pool.stats()).toMatchObject({ busy: 1, queued: 1 });
    running.abort();
    expect(await spinning).toMatchObject({ kind: 'aborted' });
    expect(await afterwards).toBe('after');
    expect(pool.stats().started).toBe(2);
    expect(await failureOf(run(pool, { type: 'echo', value: 1 }, AbortSignal.abort()))).toMatchObject({ kind: 'aborted' });
  });

  it('runs up to `size` tasks at once, one worker each', async () => {
    const pool = makePool({ size: 2 });
    const tasks = [failureOf(run(pool, { type: 'spin' })), failureOf(run(pool, { type: 'spin' })), failureOf(run(pool, { type: 'spin' }))];
    await vi.waitFor(() => expect(pool.stats()).toEqual({ size: 2, busy: 2, queued: 1, started: 2 }), { timeout: 20_000 });
    await pool.close();
    for (const task of tasks) expect(await task).toMatchObject({ kind: 'closed' });
  });

  it('close() rejects running and queued tasks, terminates the workers and refuses new tasks', async () => {
    const pool = makePool();
    await run(pool, { type: 'echo', value: 'warm' });
    const spinning = failureOf(run(pool, { type: 'spin' }));
    const queued = failureOf(run(pool, { type: 'echo', value: 'never' }));
    await pool.close();
    expect(await spinning).toMatchObject({ kind: 'closed' });
    expect(await queued).toMatchObject({ kind: 'closed' });
    expect(await failureOf(run(pool, { type: 'echo', value: 1 }))).toMatchObject({ kind: 'closed' });
    await pool.close();
    expect(pool.stats()).toMatchObject({ busy: 0, queued: 0 });
  });
});
