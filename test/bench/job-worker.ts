import { fork, type ChildProcess } from 'node:child_process';
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';

/**
 * A benchmark's helper process (a load generator, a webhook receiver, an upstream mock), so that it never
 * competes with the measured service for the event loop: the parent forks a module under the tsx loader and
 * sends it jobs over IPC; the child runs them one at a time with `serveJobs`. Used by load.ts, chat-bench.ts,
 * webhooks-bench.ts and provider-mock-process.ts.
 */
export interface JobWorker<J, R> {
  run(job: J): Promise<R>;
  close(): Promise<void>;
}

type ToChild<J> = { id: number; job: J };
type FromChild<R> = { id: number; result?: R; error?: string };

/** Forks `moduleUrl` with `env` set; `boundMs(job)` is the hard limit of one job, after which the child is killed. */
export function forkJobWorker<J, R>(moduleUrl: string, env: Record<string, string>, boundMs: (job: J) => number): JobWorker<J, R> {
  const tsxLoader = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href;
  const child: ChildProcess = fork(fileURLToPath(moduleUrl), [], {
    execPath: process.execPath,
    execArgv: ['--import', tsxLoader],
    env: { ...process.env, ...env },
    // The child's stdout goes to our stderr: stdout is reserved for the JSON result lines.
    stdio: ['ignore', 2, 2, 'ipc'],
    serialization: 'advanced',
  });
  let nextId = 0;
  const pending = new Map<number, { resolve(r: R): void; reject(e: Error): void; timer: NodeJS.Timeout }>();
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.on('message', (message: FromChild<R>) => {
    const entry = pending.get(message.id);
    if (!entry) return;
    pending.delete(message.id);
    clearTimeout(entry.timer);
    if (message.result !== undefined) entry.resolve(message.result);
    else entry.reject(new Error(`bench worker: ${message.error ?? 'no result'}`));
  });
  child.once('exit', (code, signal) => {
    for (const entry of pending.values()) {
      clearTimeout(entry.timer);
      entry.reject(new Error(`bench worker exited (code ${code}, signal ${signal})`));
    }
    pending.clear();
  });
  return {
    run(job) {
      const id = ++nextId;
      return new Promise<R>((resolve, reject) => {
        const timer = setTimeout(() => {
          pending.delete(id);
          child.kill('SIGKILL');
          reject(new Error('bench worker did not answer in time; killed it'));
        }, boundMs(job));
        pending.set(id, { resolve, reject, timer });
        child.send({ id, job } satisfies ToChild<J>);
      });
    },
    async close() {
      if (child.exitCode === null && child.signalCode === null) {
        if (child.connected) child.disconnect();
        const killer = setTimeout(() => child.kill('SIGKILL'), 5_000);
        await exited;
        clearTimeout(killer);
      }
    },
  };
}

/**
 * The child's side: runs each job it is sent, serialised (a second job waits for the first, so two never
 * compete for this core), and answers with the result or the error. The child exits by itself when the
 * parent disconnects the IPC channel.
 */
export function serveJobs<J, R>(run: (job: J) => Promise<R>): void {
  const send = process.send!.bind(process);
  let queue = Promise.resolve();
  process.on('message', (message: ToChild<J>) => {
    queue = queue.then(async () => {
      try {
        send({ id: message.id, result: await run(message.job) } satisfies FromChild<R>);
      } catch (error) {
        send({ id: message.id, error: error instanceof Error ? error.message : String(error) } satisfies FromChild<R>);
      }
    });
  });
}
