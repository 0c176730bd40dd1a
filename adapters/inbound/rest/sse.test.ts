import { EventEmitter } from 'node:events';
import type { ServerResponse } from 'node:http';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { Context } from '../../../routers/context.ts';
import { streamEvents } from './sse.ts';

/** A response whose reader never reads: every write is refused by backpressure, and no drain ever comes. */
function stalledResponse() {
  const res = new EventEmitter() as EventEmitter & { destroyed: boolean; writableFinished: boolean; written: string[] };
  Object.assign(res, {
    destroyed: false,
    writableFinished: false,
    written: [] as string[],
    writeHead: () => res,
    write: (chunk: string) => {
      res.written.push(chunk);
      return false;
    },
    end: () => res,
    destroy: () => {
      res.destroyed = true;
      res.emit('close');
    },
  });
  return res;
}

const ctx = { responseHeaders: {}, requestId: 'r', deps: { errorReporter: { capture() {} } } } as unknown as Context;

afterEach(() => {
  vi.useRealTimers();
});

describe('SSE to a reader that stopped reading', () => {
  it('waits for it a minute, then closes the stream and stops the producer', async () => {
    vi.useFakeTimers();
    const res = stalledResponse();
    let produced = 0;
    let stopped = false;
    async function* events() {
      try {
        for (;;) yield { type: 'delta', text: String(produced++) };
      } finally {
        stopped = true;
      }
    }
    const streaming = streamEvents(res as unknown as ServerResponse, events(), ctx);
    await vi.advanceTimersByTimeAsync(59_000);
    expect(res.destroyed).toBe(false);
    expect(produced).toBeLessThanOrEqual(2);
    await vi.advanceTimersByTimeAsync(2_000);
    await streaming;
    expect(res.destroyed).toBe(true);
    expect(stopped).toBe(true);
  });

  it('applies the same bound to the last bytes', async () => {
    vi.useFakeTimers();
    const res = stalledResponse();
    async function* one() {
      yield { type: 'complete' };
    }
    let writes = 0;
    const write = res as unknown as { write: (chunk: string) => boolean };
    const original = write.write;
    // The event itself is taken; only the closing [DONE] meets a reader that stopped.
    write.write = (chunk: string) => {
      const taken = original(chunk);
      return writes++ === 0 ? true : taken;
    };
    const streaming = streamEvents(res as unknown as ServerResponse, one(), ctx);
    await vi.advanceTimersByTimeAsync(61_000);
    await streaming;
    expect(res.written.at(-1)).toBe('data: [DONE]\n\n');
    expect(res.destroyed).toBe(true);
  });
});
