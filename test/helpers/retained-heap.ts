import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

/**
 * The heap this process still uses after full garbage collections: what a test compares before and after work to
 * show the work kept nothing (a memory bound, not a timing).
 */
export function retainedHeapBytes(): number {
  setFlagsFromString('--expose-gc');
  const collect = runInNewContext('gc') as () => void;
  collect();
  collect();
  return process.memoryUsage().heapUsed;
}
