// Worker-thread entry: workers do not inherit the parent's loader hooks (vitest's never, and on Node 20 not
// even `--import tsx` from execArgv), so each registers tsx itself, then loads the TypeScript module named in
// workerData. Plain JavaScript, because nothing can load TypeScript yet at this point.
import { workerData } from 'node:worker_threads';
import { register } from 'tsx/esm/api';

register();
await import(workerData.script);
