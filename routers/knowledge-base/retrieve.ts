import type { AppDeps } from '../context.ts';
import { analyze, type AnalyzerLanguage } from '../../adapters/outbound/text/text-analysis.ts';
import { embedderFor } from './embedders.ts';
import { isZeroVector } from './vectors.ts';
import type { KbConfigRow } from './repository.ts';
import { findPassages } from './search-repository.ts';

/** Candidates taken from each ranking before fusion. */
export const CANDIDATES = 100;
/**
 * Reciprocal-rank fusion constant and the weight of the lexical ranking (the vector ranking gets 1 - it).
 * Tuned with `npm run bench:retrieval` (SciFact, local-hash-v1/384): the hash embedder's ranking is a weaker
 * copy of the lexical one (nDCG@10 0.457 vs BM25 0.677), so fusing it at 0.65/60 cost 0.066 nDCG@10
 * (0.610); at 0.9/10 it only breaks near-ties of BM25 (0.678, recall@100 unchanged at 0.919).
 */
export const RRF_K = 10;
export const LEXICAL_WEIGHT = 0.9;

export interface RetrievedPassage {
  chunkId: string;
  documentId: string;
  fileName: string;
  chunkIndex: number;
  page: number | null;
  text: string;
  score: number;
  lexicalRank: number | null;
  vectorRank: number | null;
}

export interface RetrievalOptions {
  mode?: 'hybrid' | 'lexical' | 'vector';
  signal?: AbortSignal;
}

/**
 * Hybrid retrieval: BM25 over the lexical index fused with vector similarity by weighted reciprocal
 * rank. Scores are scaled to [0, 1] (1 = first in both rankings).
 */
export async function retrieve(
  deps: Pick<AppDeps, 'database' | 'vectorIndexes' | 'lexicalIndexes' | 'http' | 'secrets'>,
  config: KbConfigRow,
  query: string,
  depth: number,
  options: RetrievalOptions = {},
) {
  const db = deps.database.db;
  const mode = options.mode ?? 'hybrid';
  const terms = analyze(query, config.language as AnalyzerLanguage);
  let embeddingTokens = 0;
  const lexical = mode === 'vector' ? [] : await deps.lexicalIndexes.search(db, config, terms, CANDIDATES);
  let vector: Array<{ chunkId: string; similarity: number }> = [];
  if (mode !== 'lexical') {
    const embedded = await embedderFor(deps, config).embed([query], options.signal);
    embeddingTokens = embedded.promptTokens;
    if (!isZeroVector(embedded.vectors[0]!))
      vector = await deps.vectorIndexes.search(db, {
        configId: config.id,
        version: config.serving_version,
        contentVersion: config.content_version,
        query: embedded.vectors[0]!,
        limit: CANDIDATES,
      });
  }

  const lexicalWeight = mode === 'hybrid' ? LEXICAL_WEIGHT : mode === 'lexical' ? 1 : 0;
  const fused = new Map<string, { score: number; lexicalRank: number | null; vectorRank: number | null }>();
  lexical.forEach((hit, rank) => fused.set(hit.chunkId, { score: lexicalWeight / (RRF_K + rank + 1), lexicalRank: rank + 1, vectorRank: null }));
  vector.forEach((hit, rank) => {
    const entry = fused.get(hit.chunkId) ?? { score: 0, lexicalRank: null, vectorRank: null };
    entry.score += (1 - lexicalWeight) / (RRF_K + rank + 1);
    entry.vectorRank = rank + 1;
    fused.set(hit.chunkId, entry);
  });
  const best = 1 / (RRF_K + 1);
  const ranked = [...fused.entries()].sort((a, b) => b[1].score - a[1].score || (a[0] < b[0] ? -1 : 1)).slice(0, depth);
  if (ranked.length === 0) return { passages: [] as RetrievedPassage[], embeddingTokens };

  const rows = await findPassages(
    db,
    ranked.map(([id]) => id),
  );
  const byId = new Map(rows.map((r) => [r.id, r]));
  const passages: RetrievedPassage[] = [];
  for (const [chunkId, info] of ranked) {
    const row = byId.get(chunkId);
    if (!row) continue;
    passages.push({
      chunkId,
      documentId: row.document_id,
      fileName: row.file_name,
      chunkIndex: row.chunk_index,
      page: row.page,
      text: row.text,
      score: Math.round(Math.min(1, info.score / best) * 10_000) / 10_000,
      lexicalRank: info.lexicalRank,
      vectorRank: info.vectorRank,
    });
  }
  return { passages, embeddingTokens };
}
