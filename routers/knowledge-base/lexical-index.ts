import type { Kysely } from 'kysely';
import type { DB } from '../../db/types.ts';
import type { Logger } from '../../adapters/outbound/logger.ts';
import { BM25_DEFAULT_B, BM25_DEFAULT_K1 } from '../../adapters/outbound/text/bm25.ts';
import { termFrequencies } from '../../adapters/outbound/text/text-analysis.ts';
import { type BuiltIndex, createMemoryIndexes } from './memory-indexes.ts';
import { contentVersionOf, lexicalSearch, loadChunkPage } from './search-repository.ts';

/**
 * BM25 over a knowledge base's postings (each chunk's terms) held in memory, per instance, for one content version: a query is then
 * a few array walks instead of an aggregate over the postings in SQL. The formula, parameters and tie order are
 * those of lexicalSearch (its SQL stays the reference and the answer whenever the index is not ready).
 *
 * Consistency: every change of a knowledge base's chunks bumps its content_version in the same transaction, and
 * a query reads the configuration (with that version) first. An index answers only the version it was built
 * from; for any other version the query goes to SQL and a rebuild is started in the background (one per
 * knowledge base at a time). So an index is never stale, another instance's change is seen at the next query,
 * and nothing waits for a build. A build reads in pages (yielding between them) and is kept only if the version
 * did not move while it read.
 */
export interface LexicalIndexes {
  search(
    db: Kysely<DB>,
    config: { id: string; content_version: number },
    queryTerms: string[],
    limit: number,
  ): Promise<Array<{ chunkId: string; score: number }>>;
  /** Resolves when no build is running (tests and benchmarks wait for the index to be ready). */
  idle(): Promise<void>;
  /** Stops building (running builds end at their next page); resolves when none runs. */
  close(): Promise<void>;
}

interface Index {
  chunkIds: string[];
  lengths: Float64Array;
  avgdl: number;
  postings: Map<string, { chunks: Int32Array; tfs: Float64Array }>;
}

const K1 = BM25_DEFAULT_K1;
const B = BM25_DEFAULT_B;
/** Chunks read per page of a build (their postings come with them). */
const PAGE_CHUNKS = 500;
/** How long a query waits for its knowledge base's index to be built before it is answered in SQL. */
const BUILD_WAIT_MS = 5_000;

/** Whether `promise` settles within `ms`; the timer never outlives the answer. */
async function settlesWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), ms);
  });
  try {
    return await Promise.race([promise.then(() => true), late]);
  } finally {
    clearTimeout(timer);
  }
}

export function createLexicalIndexes(options: { maxPostings: number; logger: Pick<Logger, 'warn'> }): LexicalIndexes {
  const indexes = createMemoryIndexes<Index>({ budget: options.maxPostings, kind: 'lexical', logger: options.logger });

  /** Knowledge bases found too large to hold, by the content version found so: their queries go to SQL at once. */
  const tooLarge = new Map<string, string>();

  async function build(db: Kysely<DB>, configId: string): Promise<BuiltIndex<Index> | undefined> {
    const version = await contentVersionOf(db, configId);
    if (version === undefined) return undefined;
    const chunkIds: string[] = [];
    const lengths: number[] = [];
    const byTerm = new Map<string, { chunks: number[]; tfs: number[] }>();
    let size = 0;
    let after: string | null = null;
    for (;;) {
      const page = await loadChunkPage(db, configId, after, PAGE_CHUNKS);
      if (page.length === 0) break;
      for (const chunk of page) {
        const at = chunkIds.length;
        chunkIds.push(chunk.id);
        lengths.push(chunk.term_count);
        chunk.terms.forEach((term, i) => {
          let entry = byTerm.get(term);
          if (!entry) byTerm.set(term, (entry = { chunks: [], tfs: [] }));
          entry.chunks.push(at);
          entry.tfs.push(Number(chunk.tfs[i]));
        });
        size += chunk.terms.length;
      }
      if (size > options.maxPostings) {
        tooLarge.set(configId, String(version)); // too large to hold: this version stays on SQL
        return undefined;
      }
      after = page.at(-1)!.id;
      // Other requests run between pages; a closing instance stops here, before its database closes.
      await new Promise((resolve) => setImmediate(resolve));
      if (indexes.closed) return undefined;
    }
    if ((await contentVersionOf(db, configId)) !== version) return undefined; // changed while we read: the next query retries
    const postings = new Map<string, { chunks: Int32Array; tfs: Float64Array }>();
    for (const [term, entry] of byTerm) postings.set(term, { chunks: Int32Array.from(entry.chunks), tfs: Float64Array.from(entry.tfs) });
    const total = lengths.reduce((a, b) => a + b, 0);
    const value = { chunkIds, lengths: Float64Array.from(lengths), avgdl: chunkIds.length === 0 ? 1 : total / chunkIds.length, postings };
    return { version: String(version), value, size };
  }

  return {
    async search(db, config, queryTerms, limit) {
      if (options.maxPostings === 0) return lexicalSearch(db, config.id, queryTerms, limit);
      const version = String(config.content_version);
      const index = indexes.get(config.id, version);
      if (index) return scoreIndex(index, queryTerms, limit);
      if (tooLarge.get(config.id) === version) return lexicalSearch(db, config.id, queryTerms, limit);
      // A build reads the chunks page by page, pausing between pages; BM25 in SQL over a large knowledge base is
      // one long statement, which on the embedded database holds the request thread for seconds. So a query waits
      // a while for the build and scores from memory, and only a build slower than that leaves it to SQL.
      const built = indexes.build(config.id, () => build(db, config.id));
      if (await settlesWithin(built, BUILD_WAIT_MS)) {
        const fresh = indexes.get(config.id, version);
        if (fresh) return scoreIndex(fresh, queryTerms, limit);
      }
      return lexicalSearch(db, config.id, queryTerms, limit);
    },
    idle: () => indexes.idle(),
    close: () => indexes.close(),
  };
}

/** BM25 as lexicalSearch computes it; ties by chunk id. */
function scoreIndex(index: Index, queryTerms: string[], limit: number) {
  const tf = termFrequencies(queryTerms);
  const n = index.chunkIds.length;
  const scores = new Map<number, number>();
  for (const [term, qtf] of tf) {
    const posting = index.postings.get(term);
    if (!posting) continue;
    const df = posting.chunks.length;
    const idf = Math.log(1 + (n - df + 0.5) / (df + 0.5));
    for (let i = 0; i < df; i++) {
      const chunk = posting.chunks[i]!;
      const f = posting.tfs[i]!;
      const part = (qtf * idf * (f * (K1 + 1))) / (f + K1 * (1 - B + (B * index.lengths[chunk]!) / index.avgdl));
      scores.set(chunk, (scores.get(chunk) ?? 0) + part);
    }
  }
  const ranked = [...scores.entries()].map(([chunk, score]) => ({ chunkId: index.chunkIds[chunk]!, score }));
  ranked.sort((a, b) => b.score - a.score || (a.chunkId < b.chunkId ? -1 : a.chunkId > b.chunkId ? 1 : 0));
  return ranked.slice(0, limit);
}
