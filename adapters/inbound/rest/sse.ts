import type { ServerResponse } from 'node:http';
import type { Context } from '../../../routers/context.ts';
import { toClientError } from '../client-error.ts';

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
    if (!res.write(`data: ${JSON.stringify(event)}\n\n`) && !res.destroyed) {
      await new Promise<void>((resolve) => {
        const done = () => {
          res.off('drain', done);
          res.off('close', done);
          resolve();
        };
        res.once('drain', done);
        res.once('close', done);
      });
    }
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
  if (!res.destroyed) res.end('data: [DONE]\n\n');
}
