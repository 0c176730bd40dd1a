import { LRUCache } from 'lru-cache';

/** Bounds of Yoga's caches of parsed documents and parse errors (each), in characters of document text. */
export const PARSE_CACHE_LIMITS = { entries: 1024, totalChars: 4 * 1024 * 1024, entryChars: 16 * 1024 } as const;

/**
 * A cache of documents (or parse errors) by their text, bounded by the text it holds. Yoga's default is bounded by
 * count only (1,024 for an hour), and a text can be nearly the whole 1 MiB body (a comment is no token; a document
 * refused by the token limit is a cached error): anonymous callers could pin about 2 GB per instance. A text over
 * `entryChars` is parsed every time instead of remembered; the dashboard's documents are under 2 Ki characters.
 */
export function createParseCache<T extends {}>(): LRUCache<string, T> {
  return new LRUCache<string, T>({
    max: PARSE_CACHE_LIMITS.entries,
    maxSize: PARSE_CACHE_LIMITS.totalChars,
    maxEntrySize: PARSE_CACHE_LIMITS.entryChars,
    sizeCalculation: (_value, text) => Math.max(1, text.length),
  });
}
