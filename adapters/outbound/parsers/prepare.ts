import { RecursiveCharacterTextSplitter } from '@langchain/textsplitters';
import { extractDocument, type DocumentKind, type ExtractedPage, type ZipLimits } from './extract.ts';
import { ParseError } from './parse-error.ts';

/**
 * A document's bytes to the chunks that are embedded and indexed: extraction, then splitting page by page. It runs
 * in a parsing worker (adapters/outbound/workers/document-worker.ts), so that only the chunks, not the pages' text
 * and the parser's state, come back to the thread that writes them.
 */

export interface PreparedChunk {
  index: number;
  page: number | null;
  text: string;
}

export interface PrepareOptions {
  chunkSize: number;
  chunkOverlap: number;
  /** Beyond these a document fails with a reason instead of exhausting memory. */
  maxCharacters: number;
  maxChunks: number;
  zipLimits?: ZipLimits;
  signal?: AbortSignal;
}

export interface PreparedDocument {
  pageCount: number | null;
  chunks: PreparedChunk[];
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

/** Never throws anything but {@link ParseError}, whose reason is shown to the owner. */
export async function prepareDocument(kind: DocumentKind, bytes: Uint8Array, options: PrepareOptions): Promise<PreparedDocument> {
  const extracted = await extractDocument(kind, bytes, { zipLimits: options.zipLimits, signal: options.signal });
  if (extracted.characters > options.maxCharacters)
    throw new ParseError(`The document holds more than ${options.maxCharacters.toLocaleString('en')} characters of text; split it into smaller files`);
  const chunks = await splitPages(extracted.pages, options.chunkSize, options.chunkOverlap);
  if (chunks.length === 0) throw new ParseError('The document contains no text');
  if (chunks.length > options.maxChunks)
    throw new ParseError(`The document makes ${chunks.length} chunks, more than the ${options.maxChunks} allowed; use a larger chunk size or split the file`);
  return { pageCount: extracted.pageCount, chunks };
}
