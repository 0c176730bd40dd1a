import { constants, setPriority } from 'node:os';
import { parentPort, type Transferable } from 'node:worker_threads';
import type { WorkerMessage } from './pool.ts';

export interface TaskResult {
  value: unknown;
  /** Buffers of `value` to move to the parent instead of copying. */
  transfer?: Transferable[];
}

/**
 * The worker side of adapters/outbound/workers/pool.ts: announces itself ready (its modules are loaded, so the task's
 * deadline does not pay for start-up), then runs one task at a time and posts one reply per task. A task's
 * error goes back as its name, message and own data (a ParseError's `reason`, say).
 */
export function serveTasks(handle: (task: any) => Promise<TaskResult>): void {
  const port = parentPort;
  if (!port) throw new Error('serveTasks must run in a worker thread');
  port.on('message', async ({ id, task }: { id: number; task: unknown }) => {
    let reply: WorkerMessage;
    let transfer: Transferable[] = [];
    try {
      const result = await handle(task);
      reply = { id, ok: true, value: result.value };
      transfer = result.transfer ?? [];
    } catch (error) {
      const e = error instanceof Error ? error : new Error(String(error));
      reply = { id, ok: false, error: { name: e.name, message: e.message, data: ownData(e) } };
    }
    port.postMessage(reply, transfer);
  });
  yieldToRequests();
  port.postMessage({ ready: true } satisfies WorkerMessage);
}

/**
 * A lower CPU priority (nice 10) for this thread, so that the thread answering requests gets about nine tenths
 * of a core it shares with a worker (bench:hostile: health p99 61 -> 8-13 ms with every worker busy on this
 * 2-core machine). Not the lowest (19): next to other busy processes a worker would then get almost no CPU and
 * ordinary documents would run into their deadline. Only on Linux, where the nice value belongs to the calling
 * thread: elsewhere it would slow the whole process. Lowering one's own priority needs no privilege.
 */
function yieldToRequests(): void {
  if (process.platform !== 'linux') return;
  try {
    setPriority(constants.priority.PRIORITY_BELOW_NORMAL);
  } catch {
    // Best effort: a worker at normal priority is still off the request thread.
  }
}

/** An error's own enumerable fields that survive structured cloning (strings, numbers, booleans). */
function ownData(error: Error): Record<string, unknown> {
  const data: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(error)) {
    if (['string', 'number', 'boolean'].includes(typeof value)) data[key] = value;
  }
  return data;
}
