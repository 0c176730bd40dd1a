// Worker-thread entry: workers do not inherit the parent's loader hooks (vitest's never, and on Node 20 not
// even `--import tsx` from execArgv), so a worker whose module is TypeScript registers tsx itself before loading
// it. The precompiled service's worker (server/build-service.mjs) is plain JavaScript and never loads tsx.
import { workerData } from 'node:worker_threads';

if (/\.[cm]?ts$/.test(new URL(workerData.script).pathname)) (await import('tsx/esm/api')).register();
await import(workerData.script);
