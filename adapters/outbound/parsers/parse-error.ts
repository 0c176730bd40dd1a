/**
 * A document that cannot be turned into text; `reason` is shown to the owner as the document's error. In a module
 * of its own so that the code which only reports it (the job handlers, the worker pool, on the request thread)
 * does not load the parsers.
 */
export class ParseError extends Error {
  override name = 'ParseError';
  constructor(
    readonly reason: string,
    options?: { cause?: unknown },
  ) {
    super(reason, options);
  }
}
