import type { EmbeddingResult } from '../embeddings/embedder.ts';
import type { DocumentKind, ExtractedDocument, ZipLimits } from '../parsers/extract.ts';
import { ParseError } from '../parsers/parse-error.ts';
import type { ChunkAnalysis } from '../text/chunk-analysis.ts';
import type { AnalyzerLanguage } from '../text/text-analysis.ts';
import type { PreparedDocument, PrepareOptions } from '../parsers/prepare.ts';
import type { DocumentTask, LocalModel } from './document-worker.ts';
import { createWorkerPool, WorkerFailure, WorkerTaskError, type WorkerPoolStats } from './pool.ts';

/**
 * Document parsing and local embedding, run in worker threads (adapters/outbound/workers/document-worker.ts) with a
 * deadline and a heap limit per task. A PDF of a few hundred bytes can hold tens of thousands of nested
 * graphics operators that keep pdf.js busy for a minute: on the request thread that stalls every request and
 * even SIGTERM. Every failure comes back as a {@link ParseError} whose reason can be shown to the owner.
 */
export interface DocumentPool {
  extract(kind: DocumentKind, bytes: Uint8Array, options?: { signal?: AbortSignal; zipLimits?: ZipLimits }): Promise<ExtractedDocument>;
  /**
   * Extraction, splitting and the chunks' analysis in `analyse`'s language (chunk-analysis.ts) in one task, and with
   * `embed` their local embeddings too: a document comes back ready to be written, in one round trip, and is
   * embedded as soon as it is parsed rather than behind the parsing of the documents after it.
   */
  prepare(
    kind: DocumentKind,
    bytes: Uint8Array,
    options: PrepareOptions & { analyse: AnalyzerLanguage; embed?: LocalModel },
  ): Promise<PreparedDocument & { analysis: ChunkAnalysis[]; vectors?: Float32Array[] }>;
  embedLocal(texts: string[], model: { dimensions: number; language: AnalyzerLanguage }, signal?: AbortSignal): Promise<EmbeddingResult>;
  stats(): WorkerPoolStats;
  close(): Promise<void>;
}

export interface DocumentPoolOptions {
  size: number;
  deadlineMs: number;
  memoryMb: number;
}

const seconds = (ms: number) => `${Math.round(ms / 100) / 10} s`;

export function createDocumentPool(options: DocumentPoolOptions): DocumentPool {
  const pool = createWorkerPool({ script: new URL('./document-worker.ts', import.meta.url), ...options });

  /** `what`: 'Parsing' or 'Embedding', the step named in the document's error. */
  function reasonFor(error: unknown, what: string): Error {
    if (error instanceof WorkerTaskError) {
      return error.errorName === 'ParseError' && typeof error.data.reason === 'string'
        ? new ParseError(error.data.reason, { detail: typeof error.data.detail === 'string' ? error.data.detail : undefined })
        : // Not a parser's reason but a fault of ours: the owner reads a fixed sentence, the cause keeps the detail.
          new ParseError(`${what} failed because of an unexpected error`, { cause: error });
    }
    if (!(error instanceof WorkerFailure)) return error as Error;
    switch (error.kind) {
      case 'deadline':
        return new ParseError(`${what} took longer than ${seconds(options.deadlineMs)} and was stopped`, { cause: error });
      case 'memory':
        return new ParseError(`${what} needed more than ${options.memoryMb} MB of memory and was stopped`, { cause: error });
      case 'aborted':
        return new ParseError(`${what} was cancelled`, { cause: error });
      case 'crashed':
        return new ParseError(`${what} stopped unexpectedly`, { cause: error });
      case 'closed':
        // Shutting down: not the document's fault, so not a ParseError (the job is released and runs again).
        return error;
    }
  }

  return {
    async extract(kind, bytes, { signal, zipLimits } = {}) {
      // A copy of our own to move to the worker: the caller's buffer stays usable.
      const copy = new Uint8Array(bytes);
      const task: DocumentTask = { type: 'extract', kind, bytes: copy, zipLimits };
      try {
        return await pool.run<ExtractedDocument>(task, { signal, transfer: [copy.buffer] });
      } catch (error) {
        throw reasonFor(error, 'Parsing');
      }
    },

    async prepare(kind, bytes, { signal, analyse, embed, ...options }) {
      const copy = new Uint8Array(bytes);
      const task: DocumentTask = { type: 'prepare', kind, bytes: copy, options, analyse, embed };
      try {
        return await pool.run<PreparedDocument & { analysis: ChunkAnalysis[]; vectors?: Float32Array[] }>(task, { signal, transfer: [copy.buffer] });
      } catch (error) {
        throw reasonFor(error, 'Parsing');
      }
    },

    async embedLocal(texts, { dimensions, language }, signal) {
      const task: DocumentTask = { type: 'embed-local', texts, dimensions, language };
      try {
        return await pool.run<EmbeddingResult>(task, { signal });
      } catch (error) {
        throw reasonFor(error, 'Embedding');
      }
    },

    stats: () => pool.stats(),
    close: () => pool.close(),
  };
}
