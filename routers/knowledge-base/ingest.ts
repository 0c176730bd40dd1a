import { randomUUID } from 'node:crypto';
import { RecursiveCharacterTextSplitter } from '@langchain/textsplitters';
import type { AppDeps } from '../context.ts';
import type { DocumentStage } from '../../db/types.ts';
import { extractDocument, ParseError, type ExtractedPage } from '../../adapters/parsers/extract.ts';
import type { Job, JobContext } from '../../server/jobs/queue.ts';
import { analyze, termFrequencies, type AnalyzerLanguage } from './text-analysis.ts';
import { countTokens } from './tokens.ts';
import { embedderFor } from './embedders.ts';
import { hasVecColumn, insertVectors } from './vectors.ts';
import { bumpContentVersion, findConfigById, findDocumentById, toKbDocument } from './repository.ts';
import { recordEvents, webhookEvent, withEvents } from '../webhooks/outbox.ts';

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

async function setStage(deps: AppDeps, documentId: string, stage: DocumentStage) {
  await deps.database.db.updateTable('kb_documents').set({ stage, updated_at: new Date() }).where('id', '=', documentId).where('status', '=', 'processing').execute();
}

export async function failDocument(deps: AppDeps, documentId: string, reason: string) {
  await withEvents(
    deps,
    (trx) =>
      trx
        .updateTable('kb_documents')
        .set({ status: 'failed', stage: 'failed', error: reason.slice(0, 1000), updated_at: new Date() })
        .where('id', '=', documentId)
        .where('status', '=', 'processing')
        .returningAll()
        .executeTakeFirst(),
    (failed) => (failed ? [webhookEvent(failed.owner_id, 'document.failed', toKbDocument(failed))] : []),
  );
}

/**
 * upload -> extract -> split -> embed -> index -> completed. Idempotent: a retry after a crash rewrites the
 * document's chunks inside the final transaction, so a half-finished attempt leaves nothing searchable.
 */
export async function ingestDocument(deps: AppDeps, job: Job<IngestPayload>, ctx: JobContext): Promise<void> {
  const db = deps.database.db;
  const doc = await findDocumentById(db, job.payload.documentId);
  if (!doc || doc.status !== 'processing') return;
  const config = await findConfigById(db, doc.config_id);
  if (!config) return;
  try {
    await setStage(deps, doc.id, 'extracting');
    const bytes = await deps.blobs.get(doc.blob_key);
    const extracted = await extractDocument(doc.kind, bytes, { signal: ctx.signal });
    if (extracted.characters > MAX_EXTRACTED_CHARACTERS) throw new ParseError(`The document holds more than ${MAX_EXTRACTED_CHARACTERS.toLocaleString('en')} characters of text; split it into smaller files`);
    const chunks = await splitPages(extracted.pages, config.chunk_size, config.chunk_overlap);
    if (chunks.length === 0) throw new ParseError('The document contains no text');
    if (chunks.length > MAX_CHUNKS) throw new ParseError(`The document makes ${chunks.length} chunks, more than the ${MAX_CHUNKS} allowed; use a larger chunk size or split the file`);

    await setStage(deps, doc.id, 'embedding');
    const embedder = embedderFor(deps, config);
    const vectors: Float32Array[] = [];
    for (let i = 0; i < chunks.length; i += EMBED_BATCH) {
      const batch = await embedder.embed(chunks.slice(i, i + EMBED_BATCH).map((c) => c.text), ctx.signal);
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
      const versionRow = await trx.selectFrom('kb_configs').select(['serving_version']).where('id', '=', config.id).forNoKeyUpdate().executeTakeFirst();
      if (!versionRow) return;
      // If the model was switched while we embedded, these vectors are of the old one: retry with the new one.
      if (versionRow.serving_version !== config.serving_version) throw new Error('the embedding model was switched while this document was processed');
      const current = await trx.selectFrom('kb_documents').select(['status']).where('id', '=', doc.id).forUpdate().executeTakeFirst();
      if (current?.status !== 'processing') return;
      await trx.deleteFrom('kb_chunks').where('document_id', '=', doc.id).execute();
      const rows = chunks.map((chunk) => {
        const terms = analyze(chunk.text, language);
        return { id: randomUUID(), chunk, terms };
      });
      for (let i = 0; i < rows.length; i += 500) {
        await trx
          .insertInto('kb_chunks')
          .values(
            rows.slice(i, i + 500).map(({ id, chunk, terms }) => ({
              id,
              document_id: doc.id,
              config_id: config.id,
              chunk_index: chunk.index,
              page: chunk.page,
              text: chunk.text,
              term_count: terms.length,
              token_count: countTokens(chunk.text),
            })),
          )
          .execute();
      }
      const postings = rows.flatMap(({ id, terms }) => [...termFrequencies(terms)].map(([term, tf]) => ({ config_id: config.id, term, chunk_id: id, tf })));
      for (let i = 0; i < postings.length; i += 2000) await trx.insertInto('kb_postings').values(postings.slice(i, i + 2000)).execute();
      await insertVectors(trx, rows.map(({ id }, i) => ({ chunkId: id, configId: config.id, version: config.serving_version, vector: vectors[i]! })), withVec);
      const completed = await trx
        .updateTable('kb_documents')
        .set({ status: 'completed', stage: 'searchable', error: null, page_count: extracted.pageCount, chunk_count: chunks.length, updated_at: new Date() })
        .where('id', '=', doc.id)
        .returningAll()
        .executeTakeFirstOrThrow();
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
