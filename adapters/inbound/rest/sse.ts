import type { ServerResponse } from 'node:http';
import type { Context } from '../../../routers/context.ts';
import { toClientError } from '../client-error.ts';
import { STALLED_READER_MS } from '../stalled-reader.ts';

/** Resolves when `res` takes more (drain), closes, or has waited too long, in which case it is destroyed. */
function drained(res: ServerResponse): Promise<void> {
  return new Promise<void>((resolve) => {
    const done = () => {
      clearTimeout(timer);
      res.off('drain', done);
      res.off('close', done);
      resolve();
    };
    const timer = setTimeout(() => {
      res.destroy();
      done();
    }, STALLED_READER_MS);
    res.once('drain', done);
    res.once('close', done);
  });
}

/**
 * Writes an async iterable of JSON events as Server-Sent Events: `data: <json>` lines, then `data: [DONE]`.
 * The first event is awaited before any byte is written, so a failure before it still gets the normal JSON
 * error envelope (the caller's catch). A client that disconnects stops the iteration (and, through
 * ctx.signal, the work behind it).
 */
export async function streamEvents(res: ServerResponse, events: AsyncIterable<unknown>, ctx: Context): Promise<void> {
  const iterator = events[Symbol.asyncIterator]();
  const first = await iterator.next();
  res.writeHead(200, {
    ...ctx.responseHeaders,
    'Content-Type': 'text/event-stream; charset=utf-8',
    'Cache-Control': 'no-store, no-transform',
    'X-Accel-Buffering': 'no',
  });
  const onClose = () => {
    if (!res.writableFinished) void iterator.return?.();
  };
  if (res.destroyed) {
    onClose();
    return;
  }
  res.once('close', onClose);
  // Respect backpressure: a slow reader pauses the producer instead of growing our buffer.
  const write = async (event: unknown) => {
    if (!res.write(`data: ${JSON.stringify(event)}\n\n`) && !res.destroyed) await drained(res);
  };
  try {
    let step = first;
    while (!step.done) {
      if (res.destroyed) return;
      await write(step.value);
      step = await iterator.next();
    }
  } catch (error) {
    const { appError, unexpected } = toClientError(error);
    if (unexpected) ctx.deps.errorReporter.capture(error, { requestId: ctx.requestId, path: 'sse' });
    if (!res.destroyed) await write({ type: 'error', error: { message: appError.message, code: appError.code, details: appError.details } });
  } finally {
    res.off('close', onClose);
  }
  if (res.destroyed) return;
  // The last bytes may also wait for a reader that stopped: the same bound applies to them.
  if (!res.write('data: [DONE]\n\n')) await drained(res);
  if (!res.destroyed) res.end();
}
