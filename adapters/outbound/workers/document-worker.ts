/**
 * Worker-thread entry of the document pool (adapters/outbound/workers/document-pool.ts): parses documents, analyses
 * their chunks (terms, token counts) and embeds them with the local embedder, off the thread that answers requests.
 */
import type { Embedder } from '../embeddings/embedder.ts';
import { createLocalEmbedder, localVectorOf } from '../embeddings/local-embedder.ts';
import { extractDocument, type DocumentKind, type ZipLimits } from '../parsers/extract.ts';
import { prepareDocument, type PrepareOptions } from '../parsers/prepare.ts';
import { analyseChunk } from '../text/chunk-analysis.ts';
import { preloadTokenizer } from '../text/tokens.ts';
import { analyze, type AnalyzerLanguage } from '../text/text-analysis.ts';
import { serveTasks, type TaskResult } from './serve-tasks.ts';

export type DocumentTask =
  | { type: 'extract'; kind: DocumentKind; bytes: Uint8Array; zipLimits?: ZipLimits }
  | { type: 'embed-local'; texts: string[]; dimensions: number; language: AnalyzerLanguage }
  | {
      type: 'prepare';
      kind: DocumentKind;
      bytes: Uint8Array;
      options: Omit<PrepareOptions, 'signal'>;
      /** The chunks' analysis in this language comes back with them. */
      analyse: AnalyzerLanguage;
      embed?: LocalModel;
    };

export interface LocalModel {
  dimensions: number;
  language: AnalyzerLanguage;
}

const embedders = new Map<string, Embedder>();

function localEmbedder(dimensions: number, language: AnalyzerLanguage): Embedder {
  const key = `${dimensions}:${language}`;
  let embedder = embedders.get(key);
  if (!embedder) {
    embedder = createLocalEmbedder({ dimensions, language });
    embedders.set(key, embedder);
  }
  return embedder;
}

async function handle(task: DocumentTask): Promise<TaskResult> {
  switch (task.type) {
    case 'extract':
      return { value: await extractDocument(task.kind, task.bytes, { zipLimits: task.zipLimits }) };
    case 'prepare': {
      const prepared = await prepareDocument(task.kind, task.bytes, task.options);
      const analysed = prepared.chunks.map((c) => analyze(c.text, task.analyse));
      const analysis = prepared.chunks.map((c, i) => analyseChunk(c.text, task.analyse, analysed[i]));
      const model = task.embed;
      if (!model) return { value: { ...prepared, analysis } };
      // Each chunk is analysed once for BM25 and the local model alike (the model's token count is not needed here).
      const vectors = prepared.chunks.map((c, i) =>
        localVectorOf(c.text, model.language === task.analyse ? analysed[i]! : analyze(c.text, model.language), model.dimensions),
      );
      return { value: { ...prepared, analysis, vectors }, transfer: vectors.map((v) => v.buffer as ArrayBuffer) };
    }
    case 'embed-local': {
      const result = await localEmbedder(task.dimensions, task.language).embed(task.texts);
      return { value: result, transfer: result.vectors.map((v) => v.buffer as ArrayBuffer) };
    }
  }
}

// Before the worker announces itself ready: every chunk's analysis counts tokens, and the tokenizer's load (~35 MB
// of heap at its peak) must not count against the first task's heap limit or deadline.
preloadTokenizer();
serveTasks(handle);
