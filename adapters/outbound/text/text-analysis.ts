/**
 * Text analysis for knowledge-base retrieval (pure, no I/O).
 *
 * `analyze` turns text into index terms; it is the single definition of a
 * "term" for the lexical (BM25) index, the local hash embedder and the
 * in-memory reference index (bm25.ts), so documents and queries always go
 * through exactly the same pipeline:
 *
 *  1. Unicode NFKD, then combining diacritics of Latin/Greek/Cyrillic letters
 *     are dropped ('café' → 'cafe', 'ﬁ' → 'fi', full-width → ASCII), lowercase,
 *     a few letters without a decomposition are folded (ß → ss, æ → ae, œ → oe,
 *     ø → o, ł → l, đ/ð → d, þ → th, ı → i), then NFC again (so Hangul and
 *     Japanese kana stay composed). Marks of other scripts (Devanagari vowel
 *     signs, ...) are part of their words and kept.
 *  2. A '.' or ',' between two digits is removed ('1,000' → '1000',
 *     '3.14' → '314'), so numbers stay one token.
 *  3. Split on anything that is not a letter, mark or digit. Runs of Han /
 *     Hiragana / Katakana (written without spaces) become overlapping
 *     character bigrams ('知识库' → '知识', '识库'); a lone such character is
 *     kept as it is.
 *  4. Tokens of one character and tokens longer than 64 characters (base64,
 *     hashes glued to text) are dropped.
 *  5. Stop words of the language are dropped (none for 'other').
 *  6. Stemming: Porter (the `stemmer` package) for 'en'; the conservative
 *     light stemmers (stemmers.ts) for es/fr/de/pt; none for 'other'. Only tokens
 *     made of ASCII letters are stemmed, so numbers and mixed tokens
 *     ('2019', 'covid19', 'mp3') are kept verbatim.
 *
 * Steps 1-4 are word-tokens.ts, the stop-word lists stop-words.ts.
 */
import { stemmer as porterStemmer } from 'stemmer';
import { stemFrench, stemGerman, stemPortuguese, stemSpanish } from './stemmers.ts';
import { STOP_WORDS } from './stop-words.ts';
import { tokenize } from './word-tokens.ts';

export type AnalyzerLanguage = 'en' | 'es' | 'fr' | 'de' | 'pt' | 'other';

export const DEFAULT_ANALYZER_LANGUAGE: AnalyzerLanguage = 'en';
export const ANALYZER_LANGUAGES: readonly AnalyzerLanguage[] = ['en', 'es', 'fr', 'de', 'pt', 'other'];

export function isAnalyzerLanguage(value: unknown): value is AnalyzerLanguage {
  return typeof value === 'string' && (ANALYZER_LANGUAGES as readonly string[]).includes(value);
}

const ASCII_WORD = /^[a-z]+$/;

/** The full pipeline (see the file comment). Default language: 'en'. */
export function analyze(text: string, language: AnalyzerLanguage = DEFAULT_ANALYZER_LANGUAGE): string[] {
  return analyzeTokens(tokenize(text), language);
}

/** Steps 5-6 on the tokens `tokenize` made: for a caller that needs both the tokens and the terms of a text. */
export function analyzeTokens(tokens: readonly string[], language: AnalyzerLanguage = DEFAULT_ANALYZER_LANGUAGE): string[] {
  const terms = termCacheOf(language);
  const stopWords = language === 'other' ? undefined : STOP_WORDS[language];
  const stem = STEMMERS[language];
  const out: string[] = [];
  for (const token of tokens) {
    let term = terms.get(token);
    if (term === undefined) {
      if (stopWords?.has(token)) term = null;
      else if (stem === undefined || !ASCII_WORD.test(token)) {
        // Kept as it is (a number, a mixed token, a language without a stemmer): nothing worth remembering.
        out.push(token);
        continue;
      } else term = stem(token);
      if (terms.size >= TERM_CACHE_ENTRIES) terms.clear();
      terms.set(token, term);
    }
    if (term !== null) out.push(term);
  }
  return out;
}

/**
 * Stop words and stems per language and token, remembered: stop words and stemmers are pure functions and a
 * vocabulary repeats, so answering builds (which analyse every sentence of fifty passages) mostly look words up once.
 * Tokens kept as they are (numbers, mixed tokens) are not remembered, so they cannot crowd the words out. Bounded:
 * emptied when full.
 */
const TERM_CACHE_ENTRIES = 50_000;
const termCaches = new Map<AnalyzerLanguage, Map<string, string | null>>();
function termCacheOf(language: AnalyzerLanguage) {
  let cache = termCaches.get(language);
  if (!cache) termCaches.set(language, (cache = new Map()));
  return cache;
}

/** Term → number of occurrences, in order of first occurrence. */
export function termFrequencies(terms: string[]): Map<string, number> {
  const counts = new Map<string, number>();
  for (const term of terms) counts.set(term, (counts.get(term) ?? 0) + 1);
  return counts;
}

const STEMMERS: Record<AnalyzerLanguage, ((word: string) => string) | undefined> = {
  en: porterStemmer,
  es: stemSpanish,
  fr: stemFrench,
  de: stemGerman,
  pt: stemPortuguese,
  other: undefined,
};
