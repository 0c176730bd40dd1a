import type { ServerResponse } from 'node:http';
import type { Context } from '../../routers/context.ts';
import { toClientError } from './errors.ts';

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
    'Cache-Control': 'no-cache, no-transform',
    'X-Accel-Buffering': 'no',
  });
  const onClose = () => {
    if (!res.writableFinished) void iterator.return?.();
  };
  res.once('close', onClose);
  const write = (event: unknown) => res.write(`data: ${JSON.stringify(event)}\n\n`);
  try {
    let step = first;
    while (!step.done) {
      if (res.destroyed) return;
      write(step.value);
      step = await iterator.next();
    }
  } catch (error) {
    const { appError, unexpected } = toClientError(error);
    if (unexpected) ctx.deps.errorReporter.capture(error, { requestId: ctx.requestId, path: 'sse' });
    if (!res.destroyed) write({ type: 'error', error: { message: appError.message, code: appError.code, details: appError.details } });
  } finally {
    res.off('close', onClose);
  }
  if (!res.destroyed) res.end('data: [DONE]\n\n');
}
