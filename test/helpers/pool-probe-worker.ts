/** A worker for the pool's unit tests (adapters/outbound/workers/pool.test.ts): each task misbehaves on request. */
import { threadId } from 'node:worker_threads';
import { serveTasks } from '../../adapters/outbound/workers/serve-tasks.ts';

export type ProbeTask =
  | { type: 'echo'; value: unknown }
  | { type: 'thread' }
  | { type: 'spin' }
  | { type: 'allocate' }
  | { type: 'exit'; code: number }
  | { type: 'throw'; message: string }
  | { type: 'sleep'; ms: number }
  | { type: 'bytes'; length: number };

class ProbeError extends Error {
  override name = 'ProbeError';
  readonly detail = 'kept';
}

serveTasks(async (task: ProbeTask) => {
  switch (task.type) {
    case 'echo':
      return { value: task.value };
    case 'thread':
      return { value: threadId };
    case 'spin':
      for (;;);
    case 'allocate': {
      const hoard: string[][] = [];
      for (;;) hoard.push(Array.from({ length: 100_000 }, (_, i) => `entry ${i} ${hoard.length}`));
    }
    // biome-ignore lint/suspicious/noFallthroughSwitchClause: process.exit never returns.
    case 'exit':
      process.exit(task.code);
    case 'throw':
      throw new ProbeError(task.message);
    case 'sleep':
      await new Promise((resolve) => setTimeout(resolve, task.ms));
      return { value: 'slept' };
    case 'bytes': {
      const bytes = new Uint8Array(task.length).fill(7);
      return { value: bytes, transfer: [bytes.buffer] };
    }
  }
});
