import type { ServerResponse } from 'node:http';

/**
 * How long a streamed answer waits for its reader to take what was written. Backpressure bounds what a reader that
 * stopped reading costs in memory, but not the connection and the work paused behind it: past this, it is closed.
 */
export const STALLED_READER_MS = 60_000;

/**
 * Closes `res` once it has waited `ms` for its reader without a drain, for answers written by code we do not own
 * (tRPC's stream writer awaits a drain with no deadline). A response that never fills its socket's buffer is never
 * touched; the watch ends when the response closes.
 */
export function closeWhenStalled(res: ServerResponse, ms = STALLED_READER_MS): void {
  let waitingSince: number | undefined;
  const onDrain = () => {
    waitingSince = undefined;
  };
  const watch = setInterval(
    () => {
      if (!res.writableNeedDrain) {
        waitingSince = undefined;
        return;
      }
      waitingSince ??= Date.now();
      if (Date.now() - waitingSince >= ms) res.destroy();
    },
    Math.max(10, Math.floor(ms / 4)),
  );
  watch.unref();
  res.on('drain', onDrain);
  res.once('close', () => {
    clearInterval(watch);
    res.off('drain', onDrain);
  });
}
