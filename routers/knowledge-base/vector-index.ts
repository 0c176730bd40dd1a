import type { Kysely } from 'kysely';
import type { DB } from '../../db/types.ts';
import type { Logger } from '../../adapters/outbound/logger.ts';
import { type BuiltIndex, createMemoryIndexes } from './memory-indexes.ts';
import { contentVersionOf, decodeVectorInto, loadVectorPage } from './search-repository.ts';

/**
 * Top-k cosine similarity over a knowledge base's vectors held in memory, per instance, as one Float32Array for
 * one (embedding version, content version): a scan of a few million multiplications in the service.
 *
 * Consistency follows the lexical index: an index answers only the versions it was built from. A query on any
 * other version is answered by a scan of the stored vectors, page by page, while the index is built in the
 * background (one build per knowledge base at a time); a knowledge base larger than the budget is always scanned.
 * The scores are exact either way.
 */
export interface VectorIndexes {
  search(db: Kysely<DB>, params: VectorQuery): Promise<Array<{ chunkId: string; similarity: number }>>;
  /** Resolves when no build is running. */
  idle(): Promise<void>;
  /** Stops building (running builds end at their next page); resolves when none runs. */
  close(): Promise<void>;
}

export interface VectorQuery {
  configId: string;
  /** The embedding version searched (the serving version). */
  version: number;
  contentVersion: number;
  query: Float32Array;
  limit: number;
}

type VectorRow = Awaited<ReturnType<typeof loadVectorPage>>[number];

export interface Matrix {
  ids: string[];
  dims: number;
  data: Float32Array;
}

/** Float32 values in a megabyte (for the memory budget setting). */
export const FLOATS_PER_MB = (1024 * 1024) / 4;

/** Vectors read per page of a build. */
const PAGE_ROWS = 1000;

export function createVectorIndexes(options: { maxFloats: number; logger: Pick<Logger, 'warn'> }): VectorIndexes {
  const indexes = createMemoryIndexes<Matrix>({ budget: options.maxFloats, kind: 'vector', logger: options.logger });
  const versionOf = (q: Pick<VectorQuery, 'version' | 'contentVersion'>) => `${q.version}:${q.contentVersion}`;

  /** Reads the vectors page by page; `onPage` sees each, and may stop the read by returning false. */
  async function readPages(db: Kysely<DB>, q: Pick<VectorQuery, 'configId' | 'version'>, onPage: (page: VectorRow[]) => boolean) {
    let after: string | null = null;
    for (;;) {
      const page = await loadVectorPage(db, q.configId, q.version, after, PAGE_ROWS);
      if (page.length === 0 || !onPage(page)) return;
      after = page.at(-1)!.chunk_id;
      // Other requests run between pages.
      await new Promise((resolve) => setImmediate(resolve));
    }
  }

  async function build(db: Kysely<DB>, q: VectorQuery): Promise<BuiltIndex<Matrix> | undefined> {
    const contentVersion = await contentVersionOf(db, q.configId);
    if (contentVersion === undefined) return undefined;
    const rows: VectorRow[] = [];
    let tooLarge = false;
    await readPages(db, q, (page) => {
      rows.push(...page);
      tooLarge = rows.length * ((rows[0]?.embedding.byteLength ?? 0) >> 2) > options.maxFloats;
      // A closing instance stops here, before its database closes.
      return !tooLarge && !indexes.closed;
    });
    // Too large to hold, closing, or changed while we read: not kept (the next query retries a changed one).
    if (tooLarge || indexes.closed || (await contentVersionOf(db, q.configId)) !== contentVersion) return undefined;
    const matrix = toMatrix(rows);
    return { version: versionOf({ version: q.version, contentVersion }), value: matrix, size: matrix.data.length };
  }

  /** Beyond the budget: every page scored as it is read, the best kept. */
  async function scanPages(db: Kysely<DB>, q: VectorQuery) {
    const best = new TopK(q.limit);
    const terms = nonZeroTerms(q.query);
    await readPages(db, q, (page) => {
      const matrix = toMatrix(page);
      if (matrix.dims === q.query.length) scoreTermsInto(matrix, terms, best);
      return true;
    });
    return best.sorted();
  }

  return {
    async search(db, q) {
      if (options.maxFloats === 0) return scanPages(db, q);
      const ready = () => indexes.get(q.configId, versionOf(q));
      const matrix = ready();
      if (!matrix) {
        // Answered by one scan while the index is built in the background (one build per knowledge base at a time).
        // Waiting for the build instead cost a second full read whenever the version moved while it read, which is
        // every query while a knowledge base is being ingested.
        void indexes.build(q.configId, () => build(db, q));
        return scanPages(db, q);
      }
      if (matrix.dims !== q.query.length) return [];
      const best = new TopK(q.limit);
      scoreInto(matrix, q.query, best);
      return best.sorted();
    },
    idle: () => indexes.idle(),
    close: () => indexes.close(),
  };
}

function toMatrix(rows: VectorRow[]): Matrix {
  const dims = (rows[0]?.embedding.byteLength ?? 0) >> 2;
  const data = new Float32Array(rows.length * dims);
  rows.forEach((row, i) => decodeVectorInto(row.embedding, data, i * dims));
  return { ids: rows.map((r) => r.chunk_id), dims, data };
}

/**
 * Vectors are unit length, so the dot product is the cosine similarity. Only the query's non-zero dimensions are
 * multiplied: a hashed query uses a fraction of them, and skipping a zero term leaves each sum bit-identical (the
 * remaining terms are added in the same ascending order).
 */
export function scoreInto(matrix: Matrix, query: Float32Array, best: TopK) {
  scoreTermsInto(matrix, nonZeroTerms(query), best);
}

interface QueryTerms {
  offsets: Int32Array;
  weights: Float32Array;
}

function scoreTermsInto(matrix: Matrix, { offsets, weights }: QueryTerms, best: TopK) {
  const { data, dims, ids } = matrix;
  const terms = offsets.length;
  for (let row = 0, base = 0; row < ids.length; row++, base += dims) {
    let dot = 0;
    for (let t = 0; t < terms; t++) dot += data[base + offsets[t]!]! * weights[t]!;
    best.offer(ids[row]!, dot);
  }
}

/** The query's non-zero dimensions, ascending, and their values. */
function nonZeroTerms(query: Float32Array): QueryTerms {
  let count = 0;
  for (let d = 0; d < query.length; d++) if (query[d] !== 0) count++;
  const offsets = new Int32Array(count);
  const weights = new Float32Array(count);
  for (let d = 0, t = 0; d < query.length; d++) {
    if (query[d] === 0) continue;
    offsets[t] = d;
    weights[t++] = query[d]!;
  }
  return { offsets, weights };
}

/**
 * The k best (similarity descending, then chunk id ascending: the same order from memory and from a scan) in a binary min-heap whose
 * root is the worst kept: a scan costs O(n log k) instead of sorting every row.
 */
export class TopK {
  private readonly ids: string[] = [];
  private readonly scores: number[] = [];

  constructor(private readonly k: number) {}

  /** a ranks below b. */
  private worse(i: number, j: number) {
    const a = this.scores[i]!;
    const b = this.scores[j]!;
    return a < b || (a === b && this.ids[i]! > this.ids[j]!);
  }

  offer(id: string, score: number) {
    if (this.k <= 0) return;
    if (this.ids.length < this.k) {
      this.ids.push(id);
      this.scores.push(score);
      this.up(this.ids.length - 1);
      return;
    }
    const rootScore = this.scores[0]!;
    if (score < rootScore || (score === rootScore && id > this.ids[0]!)) return;
    this.ids[0] = id;
    this.scores[0] = score;
    this.down(0);
  }

  sorted(): Array<{ chunkId: string; similarity: number }> {
    const out = this.ids.map((chunkId, i) => ({ chunkId, similarity: this.scores[i]! }));
    return out.sort((a, b) => b.similarity - a.similarity || (a.chunkId < b.chunkId ? -1 : a.chunkId > b.chunkId ? 1 : 0));
  }

  private swap(i: number, j: number) {
    [this.ids[i], this.ids[j]] = [this.ids[j]!, this.ids[i]!];
    [this.scores[i], this.scores[j]] = [this.scores[j]!, this.scores[i]!];
  }

  private up(i: number) {
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!this.worse(i, parent)) return;
      this.swap(i, parent);
      i = parent;
    }
  }

  private down(i: number) {
    const n = this.ids.length;
    for (;;) {
      const left = 2 * i + 1;
      const right = left + 1;
      let worst = i;
      if (left < n && this.worse(left, worst)) worst = left;
      if (right < n && this.worse(right, worst)) worst = right;
      if (worst === i) return;
      this.swap(i, worst);
      i = worst;
    }
  }
}
