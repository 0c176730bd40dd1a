import { randomUUID } from 'node:crypto';
import { countActivity } from '../dashboard/repository.ts';
import type { AppDeps } from '../context.ts';
import { ParseError } from '../../adapters/outbound/parsers/parse-error.ts';
import type { PreparedChunk } from '../../adapters/outbound/parsers/prepare.ts';
import type { Job, JobContext } from '../jobs/handler.ts';
import type { AnalyzerLanguage } from '../../adapters/outbound/text/text-analysis.ts';
import type { ChunkAnalysis } from '../../adapters/outbound/text/chunk-analysis.ts';
import { documentEmbedderFor } from './embedders.ts';
import { isZeroVector } from './vectors.ts';
import {
  completeDocuments,
  failProcessingDocument,
  lockProcessingDocuments,
  lockServingVersion,
  replaceChunks,
  setDocumentsStage,
  startExtraction,
  type ChunkOfDocument,
} from './ingest-repository.ts';
import { findConfigById, toKbDocument, type KbConfigRow, type KbDocumentRow } from './repository.ts';
import { recordEvents, webhookEvent, withEvents } from '../webhooks/outbox.ts';

/** Everything a document's processing touches: its bytes, the pool, the embedder, the index and the outbox. */
type IngestDeps = Pick<AppDeps, 'database' | 'blobs' | 'documentPool' | 'webhookJobs' | 'http' | 'secrets' | 'logger'>;

export interface IngestPayload {
  documentId: string;
  configId: string;
}

const EMBED_BATCH = 64;
/** Ingestion jobs claimed and processed together (kb.ingest is a batch kind of the job queue). */
export const INGEST_BATCH = 32;
/**
 * Chunks prepared before they are embedded and written: a batch of small documents goes in one transaction,
 * a large document on its own, so a batch never holds more than about this many chunks' text and vectors.
 */
const CHUNKS_PER_WRITE = 2_000;
/** Per-document ceilings: beyond them a document fails with a reason instead of exhausting memory. */
const MAX_EXTRACTED_CHARACTERS = 20_000_000;
const MAX_CHUNKS = 20_000;
/** Read-ahead of a batch's parsing (see createReadAhead): files in flight or parsed and not yet written. */
const READ_AHEAD_DOCUMENTS = 8;
const READ_AHEAD_BYTES = 8 * 1024 * 1024;
/**
 * A group this large is written while the next document is still being parsed rather than waiting to grow: its
 * transaction is long enough to overlap with parsing. Smaller groups keep growing, so a backlog of small documents
 * still goes in a few large transactions.
 */
const MIN_CHUNKS_TO_OVERLAP = 200;

export async function failDocument(deps: Pick<AppDeps, 'database' | 'webhookJobs'>, documentId: string, reason: string) {
  await withEvents(
    deps,
    async (trx) => {
      const failed = await failProcessingDocument(trx, documentId, reason.slice(0, 1000));
      if (failed) await countActivity(trx, failed.owner_id, null, { metrics: { document_failures: 1 } });
      return failed;
    },
    (failed) => (failed ? [webhookEvent(failed.owner_id, 'document.failed', toKbDocument(failed))] : []),
  );
}

/** A document extracted and split, waiting to be embedded and written. */
interface Prepared {
  job: Job<IngestPayload>;
  doc: KbDocumentRow;
  pageCount: number | null;
  chunks: PreparedChunk[];
  /** The chunks' terms and counts, analysed in the parsing worker. */
  analysis: ChunkAnalysis[];
  /** Embedded with the parsing (the local model), or undefined to embed with the group. */
  vectors: Float32Array[] | undefined;
}

/**
 * upload -> extract -> split -> embed -> index -> completed, for a batch of documents. Idempotent: a retry after a
 * crash rewrites the documents' chunks inside the final transaction, so a half-finished attempt leaves nothing
 * searchable. Documents of a batch are written together (one transaction per group of up to CHUNKS_PER_WRITE
 * chunks): a few statements for the group instead of a dozen per document. A document that cannot be parsed
 * fails alone; if a group's transaction fails, each of its documents is written on its own, so one bad document
 * costs only its own job a retry. Resolves with the jobs that failed.
 */
export async function ingestDocuments(deps: IngestDeps, jobs: Array<Job<IngestPayload>>, ctx: JobContext): Promise<Map<string, unknown>> {
  const db = deps.database.db;
  const failures = new Map<string, unknown>();
  // Only the documents still processing come back (a deleted or finished one has nothing left to do).
  const started = await startExtraction(db, [...new Set(jobs.map((j) => j.payload.documentId))]);
  const docs = new Map<string, KbDocumentRow>();
  const contents = new Map<string, Buffer>();
  for (const { inline_bytes, ...doc } of started) {
    docs.set(doc.id, doc);
    if (inline_bytes) contents.set(doc.id, inline_bytes);
  }
  const byConfig = new Map<string, Array<{ job: Job<IngestPayload>; doc: KbDocumentRow }>>();
  const seen = new Set<string>();
  for (const job of jobs) {
    const doc = docs.get(job.payload.documentId);
    // A duplicate job of a document already in this batch has nothing left to do.
    if (!doc || seen.has(doc.id)) continue;
    seen.add(doc.id);
    byConfig.set(doc.config_id, [...(byConfig.get(doc.config_id) ?? []), { job, doc }]);
  }
  for (const [configId, items] of byConfig) {
    const config = await findConfigById(db, configId);
    if (!config) continue;
    await ingestForConfig(deps, config, items, ctx, failures, contents);
  }
  return failures;
}

/** A document's uploaded bytes: from the blob store, or read with its batch from the database (blob_key null). */
async function documentBytes(deps: IngestDeps, doc: KbDocumentRow, contents: Map<string, Buffer>): Promise<Buffer> {
  if (doc.blob_key) return deps.blobs.get(doc.blob_key);
  const bytes = contents.get(doc.id);
  contents.delete(doc.id);
  // Written and deleted with its document, in the same statements: a missing row is a damaged database.
  if (!bytes) throw new Error('the uploaded file is no longer stored');
  return bytes;
}

/** One job's failure, as a single document's ingestion has always ended: failed for good, or retried. */
async function recordFailure(deps: IngestDeps, job: Job<IngestPayload>, error: unknown, ctx: JobContext, failures: Map<string, unknown>) {
  // Aborted by the queue (stop() or a lost lease): the job is released or handed over, the document must stay
  // `processing`. Parsing reports cancellation as a ParseError, which would otherwise fail the document for good.
  if (ctx.signal.aborted) throw error;
  if (error instanceof ParseError) {
    // The owner reads the reason; what failed underneath (a parser library's message, a stopped or crashed worker,
    // a fault of ours) is for operators.
    if (error.detail !== undefined)
      deps.logger.warn('document processing failed', { documentId: job.payload.documentId, reason: error.reason, detail: error.detail });
    await failDocument(deps, job.payload.documentId, error.reason);
    return;
  }
  // The error itself (a database's, a storage's) is for operators: the queue logs it with the job.
  if (job.attempts >= job.maxAttempts) {
    await failDocument(deps, job.payload.documentId, `Processing failed after ${job.attempts} attempts because of an unexpected error; upload the file again`);
  }
  failures.set(job.id, error);
}

async function ingestForConfig(
  deps: IngestDeps,
  config: KbConfigRow,
  items: Array<{ job: Job<IngestPayload>; doc: KbDocumentRow }>,
  ctx: JobContext,
  failures: Map<string, unknown>,
  contents: Map<string, Buffer>,
) {
  let group: Prepared[] = [];
  let groupChunks = 0;
  const flush = async () => {
    const ready = group;
    group = [];
    groupChunks = 0;
    if (ready.length > 0) await embedAndWrite(deps, config, ready, ctx, failures);
  };
  const ahead = createReadAhead(items, (item) => prepare(deps, config, item.job, item.doc, ctx, contents));
  for (;;) {
    // The pool parses while this thread writes: a group already worth a transaction is written as soon as the next
    // document is not parsed yet, instead of after the batch's last extraction (the two used to take turns).
    if (groupChunks >= MIN_CHUNKS_TO_OVERLAP && ahead.waiting()) await flush();
    const next = await ahead.next();
    if (!next) break;
    const { item, prepared } = next;
    if (prepared instanceof Error) {
      await recordFailure(deps, item.job, prepared, ctx, failures);
      continue;
    }
    if (groupChunks > 0 && groupChunks + prepared.chunks.length > CHUNKS_PER_WRITE) await flush();
    group.push(prepared);
    groupChunks += prepared.chunks.length;
  }
  await flush();
}

/**
 * The documents of a batch parsed ahead of the one being written, in order, within a budget: at most
 * READ_AHEAD_DOCUMENTS and READ_AHEAD_BYTES of files at once (but always one), counting those parsed and not yet
 * taken. A count alone let a batch of large PDFs hold four files and their text at once while the pool could parse
 * only one of them.
 */
export function createReadAhead<T extends { doc: Pick<KbDocumentRow, 'size_bytes'> }, R>(items: T[], start: (item: T) => Promise<R>) {
  const inFlight: Array<{ item: T; bytes: number; settled: boolean; result: Promise<R | Error> }> = [];
  let nextIndex = 0;
  let heldBytes = 0;
  const fill = () => {
    while (nextIndex < items.length) {
      const item = items[nextIndex]!;
      const bytes = Math.max(0, Number(item.doc.size_bytes) || 0);
      if (inFlight.length > 0 && (inFlight.length >= READ_AHEAD_DOCUMENTS || heldBytes + bytes > READ_AHEAD_BYTES)) return;
      nextIndex++;
      heldBytes += bytes;
      const entry = { item, bytes, settled: false, result: undefined as unknown as Promise<R | Error> };
      entry.result = start(item)
        .catch((error: unknown) => error as Error)
        .finally(() => (entry.settled = true));
      inFlight.push(entry);
    }
  };
  fill();
  return {
    /** True when the next document is still being parsed (taking it now would wait). */
    waiting: () => inFlight.length > 0 && !inFlight[0]!.settled,
    /** The next document in order with its result (an Error when it failed), or undefined after the last. */
    async next(): Promise<{ item: T; prepared: R | Error } | undefined> {
      const head = inFlight[0];
      if (!head) return undefined;
      const prepared = await head.result;
      inFlight.shift();
      heldBytes -= head.bytes;
      fill();
      return { item: head.item, prepared };
    },
  };
}

async function prepare(
  deps: IngestDeps,
  config: KbConfigRow,
  job: Job<IngestPayload>,
  doc: KbDocumentRow,
  ctx: JobContext,
  contents: Map<string, Buffer>,
): Promise<Prepared> {
  const bytes = await documentBytes(deps, doc, contents);
  // The local model's vectors are made in the worker that parsed the document, right after parsing (as
  // documentEmbedderFor would make them there, one task later); a provider's are fetched for the whole group.
  const settings = config.serving_embedding;
  const embed = settings.provider === 'local' ? { dimensions: settings.dimensions, language: config.language as AnalyzerLanguage } : undefined;
  const prepared = await deps.documentPool.prepare(doc.kind, bytes, {
    chunkSize: config.chunk_size,
    chunkOverlap: config.chunk_overlap,
    maxCharacters: MAX_EXTRACTED_CHARACTERS,
    maxChunks: MAX_CHUNKS,
    signal: ctx.signal,
    analyse: config.language as AnalyzerLanguage,
    embed,
  });
  return { job, doc, pageCount: prepared.pageCount, chunks: prepared.chunks, analysis: prepared.analysis, vectors: prepared.vectors };
}

async function embedAndWrite(deps: IngestDeps, config: KbConfigRow, group: Prepared[], ctx: JobContext, failures: Map<string, unknown>) {
  const db = deps.database.db;
  const ids = group.map((p) => p.doc.id);
  let vectors: Float32Array[];
  try {
    // The local model's vectors were made with the parsing: such a group is written at once, with no embedding or
    // indexing stage to show (a statement each, for a state that would last milliseconds).
    const toEmbed = group.some((p) => !p.vectors);
    if (toEmbed) await setDocumentsStage(db, ids, 'embedding');
    const embedder = documentEmbedderFor(deps, config);
    const texts = group.flatMap((p) => (p.vectors ? [] : p.chunks.map((c) => c.text)));
    vectors = [];
    for (let i = 0; i < texts.length; i += EMBED_BATCH) {
      const batch = await embedder.embed(texts.slice(i, i + EMBED_BATCH), ctx.signal);
      vectors.push(...batch.vectors);
      await ctx.heartbeat();
    }
    if (toEmbed) await setDocumentsStage(db, ids, 'indexing');
  } catch (error) {
    for (const p of group) await recordFailure(deps, p.job, error, ctx, failures);
    return;
  }
  let offset = 0;
  const withVectors = group.map((p) => {
    if (p.vectors) return { ...p, vectors: p.vectors };
    const own = vectors.slice(offset, offset + p.chunks.length);
    offset += p.chunks.length;
    return { ...p, vectors: own };
  });
  try {
    await writeDocuments(deps, config, withVectors);
  } catch (error) {
    if (group.length === 1) {
      await recordFailure(deps, group[0]!.job, error, ctx, failures);
      return;
    }
    // Find the document at fault: each one again, in a transaction of its own.
    for (const one of withVectors) {
      try {
        await writeDocuments(deps, config, [one]);
      } catch (single) {
        await recordFailure(deps, one.job, single, ctx, failures);
      }
    }
  }
}

/** One transaction: the documents' chunks (with their terms) and vectors, `completed`, content_version, webhooks. */
async function writeDocuments(deps: IngestDeps, config: KbConfigRow, group: Array<Omit<Prepared, 'vectors'> & { vectors: Float32Array[] }>) {
  const db = deps.database.db;
  const rows = group.map((p) => ({
    prepared: p,
    chunks: p.chunks.map((chunk, i) => ({ id: randomUUID(), chunk, analysis: p.analysis[i]!, vector: p.vectors[i]! })),
  }));
  let webhooksQueued = 0;
  await db.transaction().execute(async (trx) => {
    // Lock order: the config row first, before any insert. The chunk inserts take KEY SHARE locks on it
    // through their foreign key; upgrading to a row lock after that deadlocks two concurrent ingestions.
    // Held here, it also stops a re-embedding from switching models before this commits.
    const servingVersion = await lockServingVersion(trx, config.id);
    if (servingVersion === undefined) return;
    // If the model was switched while we embedded, these vectors are of the old one: retry with the new one.
    if (servingVersion !== config.serving_version) throw new Error('the embedding model was switched while this document was processed');
    const processing = await lockProcessingDocuments(
      trx,
      group.map((p) => p.doc.id),
    );
    const live = rows.filter((r) => processing.has(r.prepared.doc.id));
    if (live.length === 0) return;
    const chunks: ChunkOfDocument[] = [];
    for (const { prepared, chunks: analysed } of live) {
      for (const { id, chunk, analysis, vector } of analysed) {
        // A text with no letters or digits embeds to zero: it has no direction, so it gets no vector (lexical only).
        chunks.push({
          id,
          documentId: prepared.doc.id,
          index: chunk.index,
          page: chunk.page,
          text: chunk.text,
          ...analysis,
          vector: isZeroVector(vector) ? undefined : vector,
        });
      }
    }
    await replaceChunks(
      trx,
      config.id,
      config.serving_version,
      live.map((r) => r.prepared.doc.id),
      chunks,
    );
    const completed = await completeDocuments(
      trx,
      config.id,
      live.map(({ prepared }) => ({ id: prepared.doc.id, pageCount: prepared.pageCount, chunkCount: prepared.chunks.length })),
    );
    webhooksQueued = (
      await recordEvents(
        trx,
        completed.map((row) => webhookEvent(row.owner_id, 'document.completed', toKbDocument(row))),
      )
    ).queued;
  });
  if (webhooksQueued > 0) deps.webhookJobs.notify();
}
