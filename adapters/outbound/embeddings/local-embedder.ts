/**
 * A model-free embedder: signed feature hashing of the analysed text.
 *
 * Features (all from `analyze`, so stemming and stop words match the BM25 index):
 *  - each term (stemmed unigram), weight 1;
 *  - each pair of adjacent terms (bigram), weight 0.5 — phrase/word-order signal;
 *  - each character 4-gram of each term padded as '<term>', weight 0.3 —
 *    partial matches between related forms, compounds and typos
 *    ('<run', 'runn', 'unne', 'nner', 'ner>' for 'runner').
 * Each distinct feature gets weight × (1 + ln count) (sublinear tf) and is
 * added to one of `dimensions` buckets with a sign, both from a 32-bit hash
 * (FNV-1a over UTF-16 code units with a per-feature-kind seed, then the
 * murmur3 fmix32 finaliser): bucket = (h & 0x7fffffff) mod dimensions,
 * sign = bit 31. The sign makes collisions cancel in expectation instead of
 * inflating similarity. The vector is then L2-normalised, so the dot product
 * is the cosine similarity.
 *
 * Deterministic: pure integer arithmetic on the text, accumulation in a fixed
 * order, Float64 sums rounded once to Float32; the same text gives
 * bit-identical vectors in every process and version of this model id.
 * Changing anything here (or in `analyze`) requires a new model id.
 *
 * A text with no letters or digits embeds to the ZERO vector (norm 0, cosine
 * undefined — callers should skip it rather than store it). A text made only
 * of stop words falls back to its unfiltered tokens, so 'to be or not to be'
 * still has a vector.
 */
import { analyze, type AnalyzerLanguage } from '../text/text-analysis.ts';
import { tokenize } from '../text/word-tokens.ts';
import { countTokens } from '../text/tokens.ts';
import type { Embedder, EmbeddingResult } from './embedder.ts';

export const LOCAL_EMBEDDING_MODEL = 'local-hash-v1';
export const LOCAL_EMBEDDING_DEFAULT_DIMENSIONS = 384;

const UNIGRAM_WEIGHT = 1;
const BIGRAM_WEIGHT = 0.5;
const CHAR_GRAM_WEIGHT = 0.3;
const CHAR_GRAM_SIZE = 4;

const UNIGRAM_SEED = 0x01;
const BIGRAM_SEED = 0x02;
const CHAR_GRAM_SEED = 0x03;
const BIGRAM_SEPARATOR = 0x1f;

const FNV_OFFSET = 0x811c9dc5;
const FNV_PRIME = 0x01000193;
// pgvector's limit for the `vector` type.
const MAX_DIMENSIONS = 16_000;

/** FNV-1a (32-bit) over the UTF-16 code units of s[start, end), continuing from `hash`. */
function fnvUpdate(hash: number, s: string, start = 0, end = s.length): number {
  let h = hash;
  for (let i = start; i < end; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, FNV_PRIME);
  }
  return h;
}

function fnvStart(seed: number): number {
  return Math.imul(FNV_OFFSET ^ seed, FNV_PRIME);
}

/** murmur3's 32-bit finaliser: every input bit affects every output bit. */
function fmix32(hash: number): number {
  let h = hash;
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

function countFeature(counts: Map<number, number>, hash: number): void {
  const key = fmix32(hash);
  counts.set(key, (counts.get(key) ?? 0) + 1);
}

/** The features of one text, as weighted feature hashes, in a fixed order. */
function features(terms: string[]): Array<[Map<number, number>, number]> {
  const unigrams = new Map<number, number>();
  const bigrams = new Map<number, number>();
  const charGrams = new Map<number, number>();
  for (let i = 0; i < terms.length; i++) {
    const term = terms[i] ?? '';
    const termHash = fnvUpdate(fnvStart(UNIGRAM_SEED), term);
    countFeature(unigrams, termHash);

    const next = terms[i + 1];
    if (next !== undefined) {
      let h = fnvUpdate(fnvStart(BIGRAM_SEED), term);
      h = Math.imul(h ^ BIGRAM_SEPARATOR, FNV_PRIME);
      countFeature(bigrams, fnvUpdate(h, next));
    }

    const padded = `<${term}>`;
    const last = Math.max(padded.length - CHAR_GRAM_SIZE, 0);
    for (let start = 0; start <= last; start++) {
      const end = Math.min(start + CHAR_GRAM_SIZE, padded.length);
      countFeature(charGrams, fnvUpdate(fnvStart(CHAR_GRAM_SEED), padded, start, end));
    }
  }
  return [
    [unigrams, UNIGRAM_WEIGHT],
    [bigrams, BIGRAM_WEIGHT],
    [charGrams, CHAR_GRAM_WEIGHT],
  ];
}

function embedOne(text: string, dimensions: number, language: AnalyzerLanguage): Float32Array {
  return localVectorOf(text, analyze(text, language), dimensions);
}

/**
 * The local model's vector of `text` from its analysed terms (`analyze(text, language)` in the embedder's language),
 * for callers that analysed the text already (the parsing worker analyses every chunk for BM25): the same vector as
 * embedding the text, without analysing it twice.
 */
export function localVectorOf(text: string, analysed: string[], dimensions: number): Float32Array {
  checkDimensions(dimensions);
  const terms = analysed.length > 0 ? analysed : tokenize(text);
  const sums = new Float64Array(dimensions);
  for (const [counts, weight] of features(terms)) {
    for (const [hash, count] of counts) {
      const value = weight * (1 + Math.log(count));
      const bucket = (hash & 0x7fffffff) % dimensions;
      sums[bucket] = (sums[bucket] ?? 0) + (hash & 0x80000000 ? -value : value);
    }
  }
  let norm = 0;
  for (let i = 0; i < dimensions; i++) norm += (sums[i] ?? 0) ** 2;
  const vector = new Float32Array(dimensions);
  if (norm === 0) return vector;
  const scale = 1 / Math.sqrt(norm);
  for (let i = 0; i < dimensions; i++) vector[i] = (sums[i] ?? 0) * scale;
  return vector;
}

function checkDimensions(dimensions: number) {
  if (!Number.isInteger(dimensions) || dimensions < 1 || dimensions > MAX_DIMENSIONS) {
    throw new RangeError(`dimensions must be an integer between 1 and ${MAX_DIMENSIONS}`);
  }
}

export function createLocalEmbedder(options: { dimensions?: number; language?: AnalyzerLanguage } = {}): Embedder {
  const dimensions = options.dimensions ?? LOCAL_EMBEDDING_DEFAULT_DIMENSIONS;
  checkDimensions(dimensions);
  const language = options.language ?? 'en';
  return {
    model: LOCAL_EMBEDDING_MODEL,
    dimensions,
    async embed(texts: string[], signal?: AbortSignal): Promise<EmbeddingResult> {
      signal?.throwIfAborted();
      const vectors: Float32Array[] = [];
      let promptTokens = 0;
      for (const text of texts) {
        vectors.push(embedOne(text, dimensions, language));
        promptTokens += countTokens(text);
      }
      return { vectors, promptTokens };
    },
  };
}
