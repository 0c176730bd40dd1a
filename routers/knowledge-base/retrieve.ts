import { sql, type Kysely } from 'kysely';
import type { DB } from '../../db/types.ts';
import type { AppDeps } from '../context.ts';
import { analyze, BM25_DEFAULT_B, BM25_DEFAULT_K1, termFrequencies, type AnalyzerLanguage } from './text-analysis.ts';
import { embedderFor } from './embedders.ts';
import { isZeroVector, searchVectors } from './vectors.ts';
import type { KbConfigRow } from './repository.ts';

// BM25 with the same formula and parameters as Bm25Index in text-analysis.ts, which tests hold this SQL to.
const K1 = BM25_DEFAULT_K1;
const B = BM25_DEFAULT_B;
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

export async function lexicalSearch(db: Kysely<DB>, configId: string, queryTerms: string[], limit: number) {
  const tf = termFrequencies(queryTerms);
  if (tf.size === 0) return [];
  const terms = [...tf.keys()];
  const weights = terms.map((t) => tf.get(t)!);
  const { rows } = await sql<{ chunk_id: string; score: number }>`
    with q as (select * from unnest(cast(${terms} as text[]), cast(${weights} as int[])) as q(term, qtf)),
    stats as (select count(*)::float8 as n, coalesce(avg(term_count), 1)::float8 as avgdl from kb_chunks where config_id = ${configId}),
    df as (
      select p.term, count(*)::float8 as df from kb_postings p join q on q.term = p.term
      where p.config_id = ${configId} group by p.term
    )
    select p.chunk_id,
      sum(q.qtf * ln(1 + (stats.n - df.df + 0.5) / (df.df + 0.5))
          * (p.tf * ${K1 + 1}::float8) / (p.tf + ${K1}::float8 * (1 - ${B}::float8 + ${B}::float8 * c.term_count / stats.avgdl))) as score
    from kb_postings p
      join q on q.term = p.term
      join df on df.term = p.term
      join kb_chunks c on c.id = p.chunk_id
      cross join stats
    where p.config_id = ${configId}
    group by p.chunk_id
    order by score desc, p.chunk_id
    limit ${limit}`.execute(db);
  return rows.map((r) => ({ chunkId: r.chunk_id, score: Number(r.score) }));
}

export interface RetrievalOptions {
  mode?: 'hybrid' | 'lexical' | 'vector';
  signal?: AbortSignal;
}

/**
 * Hybrid retrieval: BM25 over the lexical index fused with vector similarity by weighted reciprocal
 * rank. Scores are scaled to [0, 1] (1 = first in both rankings).
 */
export async function retrieve(deps: AppDeps, config: KbConfigRow, query: string, depth: number, options: RetrievalOptions = {}) {
  const db = deps.database.db;
  const mode = options.mode ?? 'hybrid';
  const terms = analyze(query, config.language as AnalyzerLanguage);
  let embeddingTokens = 0;
  const lexical = mode === 'vector' ? [] : await lexicalSearch(db, config.id, terms, CANDIDATES);
  let vector: Array<{ chunkId: string; similarity: number }> = [];
  if (mode !== 'lexical') {
    const embedded = await embedderFor(deps, config).embed([query], options.signal);
    embeddingTokens = embedded.promptTokens;
    if (!isZeroVector(embedded.vectors[0]!)) vector = await searchVectors(db, deps.vectorSearch, {
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

  const rows = await db
    .selectFrom('kb_chunks')
    .innerJoin('kb_documents', 'kb_documents.id', 'kb_chunks.document_id')
    .select(['kb_chunks.id', 'kb_chunks.document_id', 'kb_chunks.chunk_index', 'kb_chunks.page', 'kb_chunks.text', 'kb_documents.file_name'])
    .where('kb_chunks.id', 'in', ranked.map(([id]) => id))
    .where('kb_documents.status', '=', 'completed')
    .execute();
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
