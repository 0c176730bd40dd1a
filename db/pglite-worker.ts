/**
 * The thread that owns the embedded database (started by db/pglite-thread.ts). PGlite is PostgreSQL compiled to
 * WebAssembly and runs synchronously in the thread that calls it; here that is not the request thread, so a long
 * statement (a vacuum, an index build, a large batch) never holds up requests, TLS handshakes or timers, and the
 * engine's time is spent on the second core while the request thread parses and answers.
 *
 * Messages are answered in the order they come; statements reach the engine one at a time (the session's lock), and
 * the request thread's dialect holds its own lock for a transaction's statements.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { PGlite } from '@electric-sql/pglite';
import { vector } from '@electric-sql/pglite-pgvector';
import { btree_gist } from '@electric-sql/pglite/contrib/btree_gist';
import { PGliteSession } from './pglite-session.ts';
import type { EngineArtifacts, PGliteThreadOptions, ThreadReply, ThreadRequest } from './pglite-thread.ts';

const port = parentPort!;
const { options, artifacts } = workerData as { options: PGliteThreadOptions; artifacts: EngineArtifacts };

/** The fields of a database error the request thread reads (SQLSTATE, constraint, detail...), as plain data. */
function errorData(error: unknown) {
  if (!(error instanceof Error)) return { name: 'Error', message: String(error), fields: {} };
  const fields: Record<string, string | number | boolean> = {};
  for (const [key, value] of Object.entries(error)) {
    if (typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean') fields[key] = value;
  }
  return { name: error.name, message: error.message, fields };
}

async function open(): Promise<PGlite> {
  return PGlite.create({
    pgliteWasmModule: artifacts.pgliteWasmModule,
    initdbWasmModule: artifacts.initdbWasmModule,
    fsBundle: new Blob([artifacts.fsBundle]),
    dataDir: options.dataDir,
    loadDataDir: options.loadDataDir ? new Blob([options.loadDataDir]) : undefined,
    // pgvector stays loaded for data directories whose earlier migrations created the extension (0002); nothing
    // uses it since vectors are stored as bytes (0018).
    extensions: { vector, btree_gist },
    startParams: [...PGlite.defaultStartParams, '-c', `shared_buffers=${options.sharedBuffersMb}MB`],
  });
}

async function serve(pglite: PGlite) {
  const session = new PGliteSession(pglite);
  const unlisteners = new Map<number, () => Promise<void>>();

  async function answer(request: ThreadRequest): Promise<{ value: unknown; transfer?: ArrayBuffer[] }> {
    switch (request.op) {
      case 'run':
        if (request.begin)
          await session.run('begin', []).catch((error: unknown) => Promise.reject(Object.assign(error as Error, { transactionNotBegun: true })));
        return { value: await session.run(request.sql, request.parameters) };
      case 'listen': {
        // Posted as they come, before the notifying statement's own answer: the request thread sees the
        // notification first, as it did in process.
        const unlisten = await pglite.listen(request.channel, (payload) => port.postMessage({ notify: request.listener, payload } satisfies ThreadReply));
        unlisteners.set(request.listener, unlisten);
        return { value: undefined };
      }
      case 'unlisten': {
        const unlisten = unlisteners.get(request.listener);
        unlisteners.delete(request.listener);
        if (unlisten && !pglite.closed) await unlisten();
        return { value: undefined };
      }
      case 'dump': {
        const bytes = await (await pglite.dumpDataDir('gzip')).arrayBuffer();
        return { value: bytes, transfer: [bytes] };
      }
      case 'close':
        if (!pglite.closed) await pglite.close();
        return { value: undefined };
    }
  }

  const fail = (id: number, error: unknown) => port.postMessage({ id, ok: false, error: errorData(error) } satisfies ThreadReply);
  port.on('message', (request: ThreadRequest) => {
    answer(request).then(
      ({ value, transfer }) => {
        try {
          port.postMessage({ id: request.id, ok: true, value } satisfies ThreadReply, transfer ?? []);
        } catch (error) {
          // A value the engine gave that cannot cross: that statement fails, the thread goes on.
          fail(request.id, error);
        }
      },
      (error: unknown) => fail(request.id, error),
    );
  });
}

open().then(
  (pglite) => {
    void serve(pglite);
    port.postMessage({ ready: true } satisfies ThreadReply);
  },
  (error: unknown) => port.postMessage({ failed: errorData(error) } satisfies ThreadReply),
);
