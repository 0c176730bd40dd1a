import { OutboundError, toOutboundError, type ErrorContext } from './outbound-error.ts';

// setTimeout silently turns larger delays into 1 ms.
const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * One request's lifetime: a single deadline, the caller's AbortSignal, and
 * the first failure, which tears everything down exactly once.
 */
export class Exchange {
  private failure: OutboundError | null = null;
  private settled = false;
  private readonly handlers: Array<(err: OutboundError) => void> = [];
  private readonly timer: NodeJS.Timeout;
  private readonly detachSignal: () => void;

  constructor(
    private readonly ctx: ErrorContext,
    timeoutMs: number,
    signal: AbortSignal | undefined,
  ) {
    const delay = Number.isFinite(timeoutMs) ? Math.min(Math.max(timeoutMs, 1), MAX_TIMER_MS) : MAX_TIMER_MS;
    this.timer = setTimeout(() => {
      this.fail(new OutboundError('timeout', `request to ${ctx.origin} timed out after ${timeoutMs} ms`));
    }, delay);
    if (signal) {
      const onAbort = (): void => this.fail(new OutboundError('aborted', `request to ${ctx.origin} was aborted`));
      signal.addEventListener('abort', onAbort, { once: true });
      this.detachSignal = () => signal.removeEventListener('abort', onAbort);
    } else {
      this.detachSignal = () => undefined;
    }
  }

  fail(err: unknown): void {
    if (this.settled) return;
    this.settled = true;
    const failure = toOutboundError(err, this.ctx);
    this.failure = failure;
    this.release();
    for (const handler of this.handlers.splice(0)) handler(failure);
  }

  complete(): void {
    if (this.settled) return;
    this.settled = true;
    this.handlers.length = 0;
    this.release();
  }

  /** Runs now if the exchange already failed, otherwise on failure. */
  onFail(handler: (err: OutboundError) => void): void {
    if (this.failure !== null) handler(this.failure);
    else if (!this.settled) this.handlers.push(handler);
  }

  /** Resolves with `work`, or rejects with the exchange's failure (timeout, abort, error) if that comes first. */
  race<T>(work: Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.onFail(reject);
      work.then(resolve, (err: unknown) => {
        this.fail(err);
        reject(this.failure ?? toOutboundError(err, this.ctx));
      });
    });
  }

  private release(): void {
    clearTimeout(this.timer);
    this.detachSignal();
  }
}
