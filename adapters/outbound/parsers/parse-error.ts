/**
 * A document that cannot be turned into text; `reason` is shown to the owner as the document's error. In a module
 * of its own so that the code which only reports it (the job handlers, the worker pool, on the request thread)
 * does not load the parsers.
 */
export class ParseError extends Error {
  override name = 'ParseError';
  /**
   * What failed underneath (a library's or the runtime's own message), for operators' logs and never shown to the
   * owner. A string, so that it crosses from a parsing worker to the thread that records the failure (a cause does not).
   */
  readonly detail: string | undefined;

  constructor(
    readonly reason: string,
    options?: { cause?: unknown; detail?: string },
  ) {
    super(reason, options);
    this.detail = options?.detail ?? describeCause(options?.cause);
  }
}

const MAX_DETAIL_CHARS = 500;

function describeCause(cause: unknown): string | undefined {
  if (cause === undefined) return undefined;
  const text = cause instanceof Error ? `${cause.name}: ${cause.message}` : String(cause);
  return text.slice(0, MAX_DETAIL_CHARS);
}
