/**
 * Extractive answers: what a knowledge base without a language model says.
 *
 * Only sentences taken verbatim from the retrieved passages are quoted (the
 * framing text, ellipses for clipped sentences and the source list are the
 * only additions), so nothing can be invented. Steps:
 *
 *  1. Passages are split into sentences (paragraphs, list items, headings and
 *     table rows first; then sentence punctuation, sparing common
 *     abbreviations, initials and decimals).
 *  2. Terms come from the same analyzer as the lexical index (text-analysis.ts:
 *     lowercase, punctuation dropped, stop words dropped, stemming), plus a few
 *     conversational fillers dropped from the query ("tell me", "please").
 *  3. A sentence scores the idf-weighted share of the query terms it contains
 *     (rarer terms weigh more), plus a smaller share of its passage's retrieval
 *     score; fragments of under four words (headings) count half.
 *  4. The best sentences are picked greedily, one per passage first, then
 *     others (duplicates from overlapping chunks skipped), keeping those
 *     scoring at least 40% of the best. They are printed grouped by passage,
 *     best passage first, in their original order inside a passage.
 *  5. Citations are numbered by first appearance; one number per file and page.
 */
import { analyze, analyzeTokens, isAnalyzerLanguage, type AnalyzerLanguage } from '../../adapters/outbound/text/text-analysis.ts';
import { tokenize } from '../../adapters/outbound/text/word-tokens.ts';

export interface Passage {
  chunkId: string;
  text: string;
  fileName: string;
  page: number | null;
  score: number;
}

export interface ExtractiveAnswerOptions {
  /** Sentences quoted at most (default 3, clamped to 1..8). */
  maxSentences?: number;
  /**
   * Analyzer and wording language: 'en' (default), 'es', 'fr', 'de', 'pt' (a region suffix like 'pt-BR' is fine);
   * anything else analyzes without stop words or stemming and answers in English.
   */
  language?: string;
}

export interface ExtractiveAnswer {
  answer: string;
  /** One passage per source number: cited[n - 1] is source [n] (the best-ranked quoted passage of that file and page). */
  cited: Passage[];
  found: boolean;
}

export const MAX_QUOTE_CHARS = 400;
const DEFAULT_MAX_SENTENCES = 3;
const MAX_SENTENCES_LIMIT = 8;
const RETRIEVAL_WEIGHT = 0.25;
const DENSITY_WEIGHT = 0.05;
const SHORT_FRAGMENT_WORDS = 4;
const RELATIVE_THRESHOLD = 0.4;

interface Wording {
  intro: string;
  sources: string;
  page: string;
  notFound: string;
}

const WORDING: Record<'en' | 'es' | 'fr' | 'de' | 'pt', Wording> = {
  en: { intro: 'Based on the documents:', sources: 'Sources', page: 'p.', notFound: 'I could not find anything about that in the knowledge base.' },
  es: { intro: 'Según los documentos:', sources: 'Fuentes', page: 'p.', notFound: 'No encontré nada sobre eso en la base de conocimiento.' },
  fr: { intro: "D'après les documents :", sources: 'Sources', page: 'p.', notFound: "Je n'ai rien trouvé à ce sujet dans la base de connaissances." },
  de: { intro: 'Laut den Dokumenten:', sources: 'Quellen', page: 'S.', notFound: 'Ich konnte dazu nichts in der Wissensdatenbank finden.' },
  pt: { intro: 'Com base nos documentos:', sources: 'Fontes', page: 'p.', notFound: 'Não encontrei nada sobre isso na base de conhecimento.' },
};

/** Conversational words that carry no topic in a question (English; the analyzer's stop words cover the rest). */
const QUERY_FILLERS = ['tell', 'please', 'explain', 'know', 'anything', 'something', 'thanks', 'thank', 'hello', 'hi'];

export function buildExtractiveAnswer(query: string, passages: Passage[], options: ExtractiveAnswerOptions = {}): ExtractiveAnswer {
  const { analyzer, wording } = resolveLanguage(options.language);
  const maxSentences = clampInt(options.maxSentences ?? DEFAULT_MAX_SENTENCES, 1, MAX_SENTENCES_LIMIT);
  const notFound: ExtractiveAnswer = { answer: wording.notFound, cited: [], found: false };

  const fillers = new Set(analyzer === 'en' ? analyze(QUERY_FILLERS.join(' '), 'en') : []);
  const queryTerms = [...new Set(analyze(query, analyzer))].filter((t) => !fillers.has(t));
  if (queryTerms.length === 0 || passages.length === 0) return notFound;
  const querySet = new Set(queryTerms);

  // 1-2. Sentences with their terms.
  interface Candidate {
    passageIndex: number;
    sentenceIndex: number;
    text: string;
    /** The sentence's terms in order, repeats included (shared with the cache: read only). */
    terms: readonly string[];
    words: number;
    /** Which query terms it holds (indexes into queryTerms, ascending), or undefined for none. */
    matches: number[] | undefined;
    /** The sentence's words joined by spaces, made when first needed (to find repeats across overlapping chunks). */
    key: string | undefined;
    score: number;
    coverage: number;
  }
  const candidates: Candidate[] = [];
  passages.forEach((passage, passageIndex) => {
    for (const s of analyzedSentences(passage, analyzer)) {
      candidates.push({
        passageIndex,
        sentenceIndex: s.index,
        text: s.text,
        terms: s.terms,
        words: s.words,
        matches: undefined,
        key: undefined,
        score: 0,
        coverage: 0,
      });
    }
  });
  if (candidates.length === 0) return notFound;

  // 3. Scores. Only a sentence's query terms are looked at (each counted once per sentence); a sentence's distinct
  // terms are counted only for those that hold one.
  const queryIndex = new Map(queryTerms.map((t, i) => [t, i] as const));
  const documentFrequency = new Array<number>(queryTerms.length).fill(0);
  const lastSeenIn = new Array<number>(queryTerms.length).fill(-1);
  candidates.forEach((c, ci) => {
    for (const t of c.terms) {
      const qi = queryIndex.get(t);
      if (qi === undefined || lastSeenIn[qi] === ci) continue;
      lastSeenIn[qi] = ci;
      documentFrequency[qi]! += 1;
      (c.matches ??= []).push(qi);
    }
  });
  const n = candidates.length;
  const idf = documentFrequency.map((df) => Math.log(1 + (n - df + 0.5) / (df + 0.5)));
  // Query terms found nowhere do not count: coverage is relative to what the passages can answer.
  const presentTerms = queryTerms.flatMap((_, qi) => (documentFrequency[qi]! > 0 ? [qi] : []));
  const totalIdf = presentTerms.reduce((sum, qi) => sum + idf[qi]!, 0);
  const bestRetrieval = Math.max(0, ...passages.map((p) => (Number.isFinite(p.score) ? p.score : 0)));

  for (const c of candidates) {
    if (c.matches === undefined) continue;
    // Summed in the query's term order, whatever the sentence's.
    c.matches.sort((a, b) => a - b);
    let matchedIdf = 0;
    for (const qi of c.matches) matchedIdf += idf[qi]!;
    const matched = c.matches.length;
    c.coverage = totalIdf > 0 ? matchedIdf / totalIdf : matched / presentTerms.length;
    const retrieval = passages[c.passageIndex]!.score;
    const retrievalShare = bestRetrieval > 0 && Number.isFinite(retrieval) ? Math.min(1, Math.max(0, retrieval / bestRetrieval)) : 0;
    c.score = c.coverage + RETRIEVAL_WEIGHT * retrievalShare + DENSITY_WEIGHT * (matched / new Set(c.terms).size);
    if (c.words < SHORT_FRAGMENT_WORDS) c.score *= 0.5;
  }
  const ranked = candidates
    .filter((c) => c.score > 0)
    .sort((a, b) => b.score - a.score || a.passageIndex - b.passageIndex || a.sentenceIndex - b.sentenceIndex);
  const best = ranked[0];
  if (best === undefined) return notFound;

  // 4. Selection: different passages first, then the rest; no repeats.
  const threshold = best.score * RELATIVE_THRESHOLD;
  const selected: Candidate[] = [];
  // Overlapping chunks repeat sentences, sometimes cut: a sentence whose words are contained in another's is a repeat.
  const contains = (a: string, b: string): boolean => ` ${a} `.includes(` ${b} `);
  const keyOf = (c: Candidate): string => (c.key ??= tokenize(c.text).join(' '));
  const isRepeat = (c: Candidate): boolean => selected.some((s) => contains(keyOf(s), keyOf(c)) || contains(keyOf(c), keyOf(s)));
  const usedPassages = new Set<number>();
  for (const preferNewPassage of [true, false]) {
    for (const c of ranked) {
      if (selected.length >= maxSentences || c.score < threshold) break;
      if (selected.includes(c) || (preferNewPassage && usedPassages.has(c.passageIndex)) || isRepeat(c)) continue;
      selected.push(c);
      usedPassages.add(c.passageIndex);
    }
  }

  // Grouped by passage (best passage first), original order inside a passage.
  const passageRank = new Map<number, number>();
  selected.forEach((c, rank) => {
    if (!passageRank.has(c.passageIndex)) passageRank.set(c.passageIndex, rank);
  });
  selected.sort((a, b) => passageRank.get(a.passageIndex)! - passageRank.get(b.passageIndex)! || a.sentenceIndex - b.sentenceIndex);

  // 5. Citations.
  const sourceNumbers = new Map<string, number>();
  const cited: Passage[] = [];
  const sourceLabels: string[] = [];
  const quotes: string[] = [];
  for (const c of selected) {
    const passage = passages[c.passageIndex]!;
    const key = `${passage.fileName}\u0000${passage.page ?? ''}`;
    let number = sourceNumbers.get(key);
    if (number === undefined) {
      number = cited.length + 1;
      sourceNumbers.set(key, number);
      // Groups come best passage first, so this is the best-ranked quoted passage of the source.
      cited.push(passage);
      sourceLabels.push(`[${number}] ${sourceLabel(passage, wording)}`);
    }
    quotes.push(`"${clipSentence(c.text, querySet, analyzer)}" [${number}]`);
  }
  const answer = `${wording.intro}\n\n${quotes.join('\n\n')}\n\n${wording.sources}: ${sourceLabels.join('; ')}`;
  return { answer, cited, found: true };
}

// ---------------------------------------------------------------------------
// Analysed sentences of a passage, cached

interface AnalyzedSentence {
  index: number;
  text: string;
  /** Its terms in order, repeats included. Shared with the cache: read only. */
  terms: readonly string[];
  words: number;
}

/** Passages analysed recently, by analyzer and chunk id; most of an answer's time went to analysing them again. */
const sentenceCache = new Map<string, { text: string; sentences: AnalyzedSentence[] }>();
const SENTENCE_CACHE_ENTRIES = 4096;

function analyzedSentences(passage: Passage, analyzer: AnalyzerLanguage): AnalyzedSentence[] {
  const cacheKey = `${analyzer}:${passage.chunkId}`;
  const cached = sentenceCache.get(cacheKey);
  // The text is compared, not trusted: the entry only stands for the exact text it was made from.
  if (cached && cached.text === passage.text) return cached.sentences;
  const sentences: AnalyzedSentence[] = [];
  splitSentences(passage.text).forEach((text, index) => {
    const words = tokenize(text);
    const terms = analyzeTokens(words, analyzer);
    if (terms.length === 0) return;
    sentences.push({ index, text, terms, words: words.length });
  });
  sentenceCache.delete(cacheKey);
  if (sentenceCache.size >= SENTENCE_CACHE_ENTRIES) sentenceCache.delete(sentenceCache.keys().next().value!);
  sentenceCache.set(cacheKey, { text: passage.text, sentences });
  return sentences;
}

// ---------------------------------------------------------------------------
// Sentence splitting

const LIST_MARKER = /^(?:[-*•·▪‣◦–—]\s+|\d{1,3}[.)]\s+|[a-zA-Z][)]\s+|#{1,6}\s+|>\s*)/;
/** Never end a sentence: titles and references that always precede something ("Dr. Alvarez", "e.g. this", "p. 3"). */
const LEADING_ABBREVIATIONS = new Set([
  'e.g',
  'i.e',
  'vs',
  'cf',
  'mr',
  'mrs',
  'ms',
  'dr',
  'prof',
  'sr',
  'sra',
  'jr',
  'st',
  'no',
  'nr',
  'p',
  'pp',
  'fig',
  'figs',
  'approx',
  'incl',
  'excl',
  'dept',
  'vol',
  'ch',
  'sec',
  'art',
  'para',
  'z.b',
  'bzw',
  'u.a',
  'ca',
  'av',
  'mme',
  'mlle',
  'env',
  'evtl',
  'ggf',
]);
/** End a sentence only before a capitalised word, not before a number ("Jan. 5", "min. 3"). */
const NUMBER_ABBREVIATIONS = new Set(['jan', 'feb', 'mar', 'apr', 'jun', 'jul', 'aug', 'sep', 'sept', 'oct', 'nov', 'dec', 'min', 'max', 'approx']);

/** Sentences of a passage, whitespace-collapsed, list/heading markers removed. */
export function splitSentences(text: string): string[] {
  const out: string[] = [];
  for (const segment of splitSegments(text)) {
    for (const sentence of splitOnPunctuation(segment)) {
      const cleaned = sentence.replace(LIST_MARKER, '').trim();
      if (/[\p{L}\p{N}]/u.test(cleaned)) out.push(cleaned);
    }
  }
  return out;
}

/**
 * Paragraphs, list items, headings and table rows; wrapped lines of one
 * paragraph (typical of PDF text) are joined back with a space.
 */
function splitSegments(text: string): string[] {
  const segments: string[] = [];
  for (const block of text.replace(/\r\n?/g, '\n').split(/\n[ \t]*\n/)) {
    const lines = block
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l !== '');
    let current = '';
    lines.forEach((line, i) => {
      const next = lines[i + 1];
      current = current === '' ? line : `${current} ${line}`;
      if (next === undefined || endsSegment(line, next)) {
        segments.push(current.replace(/\s+/g, ' '));
        current = '';
      }
    });
  }
  return segments;
}

function endsSegment(line: string, next: string): boolean {
  if (LIST_MARKER.test(next) || next.startsWith('|') || line.startsWith('|') || /^#{1,6}\s/.test(line)) return true;
  if (/[.!?…:。！？]["'”’)\]]*$/.test(line)) return true;
  // A short line without closing punctuation followed by a capitalised line: a heading.
  const words = line.split(/\s+/).length;
  return words <= 6 && !/[,;\-–(]$/.test(line) && /^[\p{Lu}\p{N}"“'‘(]/u.test(next);
}

function splitOnPunctuation(segment: string): string[] {
  const sentences: string[] = [];
  let start = 0;
  // A terminator run, closing quotes/brackets, then whitespace (or CJK terminators, which need none). The run is
  // matched only from its first character and whole: retried from each character of a run of dots followed by no
  // space, the search was quadratic (8,000 dots in one passage took 0.2 s). No match could start inside a run anyway.
  const boundary = /(?<![.!?…])([.!?…]+)(?![.!?…])(["'”’)\]]*)(\s+)|([。！？]+)(["'”’)\]]*)/g;
  for (let m = boundary.exec(segment); m !== null; m = boundary.exec(segment)) {
    const end = m.index + (m[4] !== undefined ? m[0].length : (m[1]?.length ?? 0) + (m[2]?.length ?? 0));
    if (m[4] === undefined) {
      const rest = segment.slice(m.index + m[0].length);
      if (rest === '') continue;
      const dots = m[1] ?? '';
      if (dots === '.' && !isSentenceEnd(segment.slice(start, m.index), rest)) continue;
      // An ellipsis inside a sentence ("wait... then").
      if (dots !== '.' && /^[.…]+$/.test(dots) && /^\p{Ll}/u.test(rest)) continue;
    }
    sentences.push(segment.slice(start, end).trim());
    start = m.index + m[0].length;
  }
  const tail = segment.slice(start).trim();
  if (tail !== '') sentences.push(tail);
  return sentences;
}

/**
 * Whether a single '.' ends a sentence: not after a title/reference
 * abbreviation or an initial ("J. Smith"), not before a lowercase word, not
 * between a month-like abbreviation and a number; otherwise yes (so "at 2 a.m.
 * The" and "etc. Then" do split).
 */
function isSentenceEnd(before: string, after: string): boolean {
  // Linear: a backtracking /(\S+)$/ over a long run of non-spaces was quadratic per boundary.
  const lastSpace = Math.max(before.lastIndexOf(' '), before.lastIndexOf('\n'), before.lastIndexOf('\t'));
  const lastWord = before.slice(lastSpace + 1);
  const bare = lastWord.replace(/^["'“‘([]+/, '').toLowerCase();
  if (LEADING_ABBREVIATIONS.has(bare)) return false;
  if (/^\p{L}$/u.test(bare)) return false;
  if (/^\p{Ll}/u.test(after)) return false;
  if (NUMBER_ABBREVIATIONS.has(bare) && /^\p{N}/u.test(after)) return false;
  return true;
}

// ---------------------------------------------------------------------------
// Output

function sourceLabel(passage: Passage, wording: Wording): string {
  const name = passage.fileName.trim() === '' ? 'untitled document' : passage.fileName.trim();
  return passage.page !== null && Number.isFinite(passage.page) ? `${name} (${wording.page} ${passage.page})` : name;
}

/**
 * A sentence of at most MAX_QUOTE_CHARS: longer ones are cut at word
 * boundaries around the window holding the most query terms, with '…' where
 * text was left out.
 */
export function clipSentence(sentence: string, queryTerms: ReadonlySet<string>, language: AnalyzerLanguage = 'en'): string {
  if (sentence.length <= MAX_QUOTE_CHARS) return sentence;
  const words = [...sentence.matchAll(/\S+/g)].map((m) => {
    const terms = analyze(m[0], language).filter((t) => queryTerms.has(t));
    return { start: m.index, end: m.index + m[0].length, terms };
  });
  const budget = MAX_QUOTE_CHARS - 2; // room for the ellipses
  let bestStart = 0;
  let bestEnd = -1;
  let bestScore = -1;
  let bestLead = Number.POSITIVE_INFINITY;
  for (let i = 0; i < words.length; i++) {
    const first = words[i]!;
    const seen = new Set<string>();
    let hits = 0;
    let firstHitOffset = -1;
    let j = i;
    for (; j < words.length && words[j]!.end - first.start <= budget; j++) {
      const w = words[j]!;
      if (w.terms.length > 0) {
        hits += 1;
        if (firstHitOffset < 0) firstHitOffset = w.start - first.start;
      }
      for (const t of w.terms) seen.add(t);
    }
    if (j === i) continue; // a single over-long word
    // Distinct terms first, then occurrences; among equals, the window whose first hit sits ~60 chars in (some lead-in context).
    const score = seen.size * 1000 + hits;
    const lead = firstHitOffset < 0 ? Number.POSITIVE_INFINITY : Math.abs(firstHitOffset - 60);
    if (score > bestScore || (score === bestScore && lead < bestLead)) {
      bestScore = score;
      bestStart = i;
      bestEnd = j - 1;
      bestLead = lead;
    }
  }
  if (bestEnd < 0) return `${sentence.slice(0, budget).trimEnd()}…`;
  const from = words[bestStart]!.start;
  const to = words[bestEnd]!.end;
  return `${from > 0 ? '…' : ''}${sentence.slice(from, to).replace(/[,;:]$/, '')}${to < sentence.length ? '…' : ''}`;
}

function resolveLanguage(language: string | undefined): { analyzer: AnalyzerLanguage; wording: Wording } {
  if (language === undefined || language.trim() === '') return { analyzer: 'en', wording: WORDING.en };
  const base = language.trim().toLowerCase().split(/[-_]/)[0] ?? '';
  if (isAnalyzerLanguage(base) && base !== 'other') return { analyzer: base, wording: WORDING[base] };
  return { analyzer: 'other', wording: WORDING.en };
}

function clampInt(value: number, min: number, max: number): number {
  if (!Number.isFinite(value)) return min;
  return Math.min(max, Math.max(min, Math.trunc(value)));
}
