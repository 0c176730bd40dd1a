import { randomUUID } from 'node:crypto';
import { countActivity } from '../dashboard/repository.ts';
import { RecursiveCharacterTextSplitter } from '@langchain/textsplitters';
import type { AppDeps } from '../context.ts';
import type { DocumentStage } from '../../db/types.ts';
import { ParseError, type ExtractedPage } from '../../adapters/outbound/parsers/extract.ts';
import type { Job, JobContext } from '../jobs/queue.ts';
import { analyze, termFrequencies, type AnalyzerLanguage } from '../../adapters/outbound/text/text-analysis.ts';
import { countTokens } from '../../adapters/outbound/text/tokens.ts';
import { documentEmbedderFor } from './embedders.ts';
import { insertVectors } from './vectors.ts';
import { hasVecColumn } from './search-repository.ts';
import {
  bumpContentVersion,
  completeDocument,
  failProcessingDocument,
  findConfigById,
  findDocumentById,
  lockDocumentStatus,
  lockServingVersion,
  replaceChunks,
  setDocumentStage,
  toKbDocument,
} from './repository.ts';
import { recordEvents, webhookEvent, withEvents } from '../webhooks/outbox.ts';

/** Everything a document's processing touches: its bytes, the pool, the embedder, the index and the outbox. */
type IngestDeps = Pick<AppDeps, 'database' | 'blobs' | 'documentPool' | 'vectorSearch' | 'webhookJobs' | 'http' | 'secrets'>;

export interface IngestPayload {
  documentId: string;
  configId: string;
}

const EMBED_BATCH = 64;
/** Per-document ceilings: beyond them a document fails with a reason instead of exhausting memory. */
const MAX_EXTRACTED_CHARACTERS = 20_000_000;
const MAX_CHUNKS = 20_000;

export interface PreparedChunk {
  index: number;
  page: number | null;
  text: string;
}

/** Splits page by page so every chunk keeps the page it came from. */
export async function splitPages(pages: ExtractedPage[], chunkSize: number, chunkOverlap: number): Promise<PreparedChunk[]> {
  const splitter = new RecursiveCharacterTextSplitter({ chunkSize, chunkOverlap });
  const chunks: PreparedChunk[] = [];
  for (const page of pages) {
    if (!page.text.trim()) continue;
    for (const text of await splitter.splitText(page.text)) {
      const trimmed = text.trim();
      if (trimmed) chunks.push({ index: chunks.length, page: page.page, text: trimmed });
    }
  }
  return chunks;
}

const setStage = (deps: Pick<AppDeps, 'database'>, documentId: string, stage: DocumentStage) => setDocumentStage(deps.database.db, documentId, stage);

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

/**
 * upload -> extract -> split -> embed -> index -> completed. Idempotent: a retry after a crash rewrites the
 * document's chunks inside the final transaction, so a half-finished attempt leaves nothing searchable.
 */
export async function ingestDocument(deps: IngestDeps, job: Job<IngestPayload>, ctx: JobContext): Promise<void> {
  const db = deps.database.db;
  const doc = await findDocumentById(db, job.payload.documentId);
  if (!doc || doc.status !== 'processing') return;
  const config = await findConfigById(db, doc.config_id);
  if (!config) return;
  try {
    await setStage(deps, doc.id, 'extracting');
    const bytes = await deps.blobs.get(doc.blob_key);
    const extracted = await deps.documentPool.extract(doc.kind, bytes, { signal: ctx.signal });
    if (extracted.characters > MAX_EXTRACTED_CHARACTERS)
      throw new ParseError(`The document holds more than ${MAX_EXTRACTED_CHARACTERS.toLocaleString('en')} characters of text; split it into smaller files`);
    const chunks = await splitPages(extracted.pages, config.chunk_size, config.chunk_overlap);
    if (chunks.length === 0) throw new ParseError('The document contains no text');
    if (chunks.length > MAX_CHUNKS)
      throw new ParseError(`The document makes ${chunks.length} chunks, more than the ${MAX_CHUNKS} allowed; use a larger chunk size or split the file`);

    await setStage(deps, doc.id, 'embedding');
    const embedder = documentEmbedderFor(deps, config);
    const vectors: Float32Array[] = [];
    for (let i = 0; i < chunks.length; i += EMBED_BATCH) {
      const batch = await embedder.embed(
        chunks.slice(i, i + EMBED_BATCH).map((c) => c.text),
        ctx.signal,
      );
      vectors.push(...batch.vectors);
      await ctx.heartbeat();
    }

    await setStage(deps, doc.id, 'indexing');
    const language = config.language as AnalyzerLanguage;
    const withVec = deps.vectorSearch === 'pgvector' || (await hasVecColumn(db));
    let webhooksQueued = 0;
    await db.transaction().execute(async (trx) => {
      // Lock order: the config row first, before any insert. The chunk inserts take KEY SHARE locks on it
      // through their foreign key; upgrading to a row lock after that deadlocks two concurrent ingestions.
      // Held here, it also stops a re-embedding from switching models before this commits.
      const servingVersion = await lockServingVersion(trx, config.id);
      if (servingVersion === undefined) return;
      // If the model was switched while we embedded, these vectors are of the old one: retry with the new one.
      if (servingVersion !== config.serving_version) throw new Error('the embedding model was switched while this document was processed');
      if ((await lockDocumentStatus(trx, doc.id)) !== 'processing') return;
      const rows = chunks.map((chunk) => {
        const terms = analyze(chunk.text, language);
        return { id: randomUUID(), chunk, terms };
      });
      const postings = rows.flatMap(({ id, terms }) => [...termFrequencies(terms)].map(([term, tf]) => ({ chunkId: id, term, tf })));
      await replaceChunks(
        trx,
        { id: doc.id, configId: config.id },
        rows.map(({ id, chunk, terms }) => ({
          id,
          index: chunk.index,
          page: chunk.page,
          text: chunk.text,
          termCount: terms.length,
          tokenCount: countTokens(chunk.text),
        })),
        postings,
      );
      await insertVectors(
        trx,
        rows.map(({ id }, i) => ({ chunkId: id, configId: config.id, version: config.serving_version, vector: vectors[i]! })),
        withVec,
      );
      const completed = await completeDocument(trx, doc.id, { pageCount: extracted.pageCount, chunkCount: chunks.length });
      await bumpContentVersion(trx, config.id);
      webhooksQueued = (await recordEvents(trx, [webhookEvent(completed.owner_id, 'document.completed', toKbDocument(completed))])).queued;
    });
    if (webhooksQueued > 0) deps.webhookJobs.notify();
  } catch (error) {
    // Aborted by the queue (stop() or a lost lease): the job is released or handed over, the document must stay
    // `processing`. Parsing reports cancellation as a ParseError, which would otherwise fail the document for good.
    if (ctx.signal.aborted) throw error;
    if (error instanceof ParseError) {
      await failDocument(deps, doc.id, error.reason);
      return;
    }
    if (job.attempts >= job.maxAttempts) {
      await failDocument(deps, doc.id, `Processing failed after ${job.attempts} attempts: ${(error as Error).message}`);
    }
    throw error;
  }
}
