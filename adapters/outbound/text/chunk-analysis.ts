import { type AnalyzerLanguage, analyze, termFrequencies } from './text-analysis.ts';
import { countTokens } from './tokens.ts';

/** What a chunk's row stores of its text besides the text: BM25's length and postings, and its token count. */
export interface ChunkAnalysis {
  /** Analysed terms, repeats counted (BM25's document length). */
  termCount: number;
  tokenCount: number;
  /** Distinct terms in order of first occurrence, and at the same positions how often each occurs. */
  terms: string[];
  tfs: number[];
}

/**
 * The same for every caller (the parsing worker, or the main thread when a document came without it). `analysed` is
 * `analyze(text, language)` when the caller has it already.
 */
export function analyseChunk(text: string, language: AnalyzerLanguage, analysed = analyze(text, language)): ChunkAnalysis {
  const tf = termFrequencies(analysed);
  return { termCount: analysed.length, tokenCount: countTokens(text), terms: [...tf.keys()], tfs: [...tf.values()] };
}
