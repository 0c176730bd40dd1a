import { afterAll, describe, expect, it } from 'vitest';
import { createLocalEmbedder } from '../embeddings/local-embedder.ts';
import { ParseError } from '../parsers/parse-error.ts';
import { prepareDocument } from '../parsers/prepare.ts';
import { analyseChunk } from '../text/chunk-analysis.ts';
import { createDocumentPool } from './document-pool.ts';

describe('document pool: prepare', () => {
  const pool = createDocumentPool({ size: 1, deadlineMs: 30_000, memoryMb: 256 });
  afterAll(() => pool.close());
  const options = { chunkSize: 120, chunkOverlap: 0, maxCharacters: 1_000_000, maxChunks: 1_000 };
  const bytes = new TextEncoder().encode(Array.from({ length: 40 }, (_, i) => `Sentence ${i} about ingestion and retrieval.`).join(' '));

  it('parses, splits, analyses and embeds in the worker exactly as the same steps do in process', async () => {
    const model = { dimensions: 64, language: 'en' as const };
    const inWorker = await pool.prepare('txt', bytes, { ...options, analyse: 'en', embed: model });
    const here = await prepareDocument('txt', bytes, options);
    expect(inWorker.chunks).toEqual(here.chunks);
    expect(inWorker.analysis).toEqual(here.chunks.map((c) => analyseChunk(c.text, 'en')));
    expect(inWorker.analysis[0]).toMatchObject({ termCount: expect.any(Number), tokenCount: expect.any(Number) });
    expect(inWorker.analysis[0]?.terms).toContain('ingest');
    const { vectors } = await createLocalEmbedder(model).embed(here.chunks.map((c) => c.text));
    expect(inWorker.vectors?.map((v) => [...v])).toEqual(vectors.map((v) => [...v]));
  });

  it('leaves embedding to the caller without a local model, and fails with the parser reason', async () => {
    const prepared = await pool.prepare('txt', bytes, { ...options, analyse: 'fr' });
    expect(prepared.vectors).toBeUndefined();
    expect(prepared.chunks.length).toBeGreaterThan(1);
    expect(prepared.analysis).toEqual(prepared.chunks.map((c) => analyseChunk(c.text, 'fr')));
    const failure = await pool.prepare('txt', bytes, { ...options, analyse: 'en', maxChunks: 1 }).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(ParseError);
    expect((failure as ParseError).reason).toMatch(/more than the 1 allowed/);
  });

  it("a parser library's failure crosses from the worker as the owner's fixed reason plus the library's detail for the log", async () => {
    const failure = await pool
      .prepare('pdf', new TextEncoder().encode('%PDF-1.7\nnot really a pdf at all'), { ...options, analyse: 'en' })
      .catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(ParseError);
    expect((failure as ParseError).reason).toMatch(/^The PDF /);
    expect((failure as ParseError).detail).toMatch(/\w/);
    expect((failure as ParseError).detail).not.toBe((failure as ParseError).reason);
  });

  it("a fault of ours inside the worker reaches the document as a fixed sentence, not the runtime's message", async () => {
    const failure = await pool.embedLocal(['text'], { dimensions: -1, language: 'en' }).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(ParseError);
    expect((failure as ParseError).reason).toBe('Embedding failed because of an unexpected error');
    expect(String((failure as ParseError).cause)).toMatch(/\w/);
  });
});
