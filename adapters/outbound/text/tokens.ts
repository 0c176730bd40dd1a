/**
 * Token counting for budgets, usage accounting and embedding fallbacks.
 *
 * Encoding: o200k_base — the default encoding of gpt-tokenizer's main export
 * (GPT-4o / GPT-4.1 / GPT-5 family). For cl100k models (text-embedding-3-*,
 * GPT-4, GPT-3.5) counts differ by a few percent; this is an estimate, used
 * where the provider does not report usage itself.
 */
import { createRequire } from 'node:module';

type GptTokenizer = typeof import('gpt-tokenizer');

// Loaded on first use, synchronously (the package's CommonJS build), not at start-up: its 200,000-entry vocabulary
// costs 30-55 MB of RSS, which a request thread that only ingests documents (the parsing workers count the chunks'
// tokens) or serves other routes never needs. The first count pays ~150 ms, once per thread.
let tokenizer: GptTokenizer | undefined;
const loadTokenizer = () => (tokenizer ??= createRequire(import.meta.url)('gpt-tokenizer') as GptTokenizer);

// User text is plain text: a literal '<|endoftext|>' in a document must be
// counted as the characters it is, not rejected (gpt-tokenizer's default is
// to throw on special tokens) nor counted as one special token.
const PLAIN_TEXT = { disallowedSpecial: new Set<string>() };

/** Loads the tokenizer now: a parsing worker counts every chunk's tokens, and loads it before its first task's heap and deadline are watched. */
export function preloadTokenizer(): void {
  loadTokenizer();
}

export function countTokens(text: string): number {
  if (text === '') return 0;
  return loadTokenizer().countTokens(text, PLAIN_TEXT);
}
