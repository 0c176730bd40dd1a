import { describe, expect, it } from 'vitest';
import { createParseCache, PARSE_CACHE_LIMITS } from './parse-cache.ts';

describe('createParseCache', () => {
  it('remembers small documents by their text', () => {
    const cache = createParseCache<{ kind: string }>();
    const document = { kind: 'Document' };
    cache.set('{ me { id } }', document);
    expect(cache.get('{ me { id } }')).toBe(document);
  });

  it('never holds a text over the entry bound: a 1 MiB padded document is parsed every time', () => {
    const cache = createParseCache<{ kind: string }>();
    const padded = `{ __typename }\n#${'x'.repeat(1024 * 1024)}`;
    cache.set(padded, { kind: 'Document' });
    expect(cache.get(padded)).toBeUndefined();
    expect(cache.size).toBe(0);
  });

  it('holds at most its total of text however many distinct documents arrive', () => {
    const cache = createParseCache<{ kind: string }>();
    const entry = PARSE_CACHE_LIMITS.entryChars;
    for (let i = 0; i < 2 * PARSE_CACHE_LIMITS.entries; i++) cache.set(`query Q${i} { __typename }\n#${'x'.repeat(entry - 40)}`, { kind: 'Document' });
    expect(cache.calculatedSize).toBeLessThanOrEqual(PARSE_CACHE_LIMITS.totalChars);
    expect(cache.size).toBeLessThanOrEqual(PARSE_CACHE_LIMITS.entries);
    // The most recent documents are the ones kept.
    expect(cache.get(`query Q${2 * PARSE_CACHE_LIMITS.entries - 1} { __typename }\n#${'x'.repeat(entry - 40)}`)).toBeDefined();
  });
});
