import type { IncomingMessage } from 'node:http';
import { describe, expect, it } from 'vitest';
import { ifNoneMatchIncludes } from './conditional-request.ts';

const request = (header?: string) => ({ headers: header === undefined ? {} : { 'if-none-match': header } }) as IncomingMessage;

describe('ifNoneMatchIncludes', () => {
  it('finds the tag alone or anywhere in a comma-separated list, whatever the spaces around the commas', () => {
    expect(ifNoneMatchIncludes(request('"abc"'), '"abc"')).toBe(true);
    expect(ifNoneMatchIncludes(request('"x", "abc"'), '"abc"')).toBe(true);
    expect(ifNoneMatchIncludes(request('"x" ,\t"abc" , "y"'), '"abc"')).toBe(true);
  });

  it('is false without the header, for another tag, or for a tag that only contains it', () => {
    expect(ifNoneMatchIncludes(request(), '"abc"')).toBe(false);
    expect(ifNoneMatchIncludes(request('"abcd", "x"'), '"abc"')).toBe(false);
    expect(ifNoneMatchIncludes(request(''), '"abc"')).toBe(false);
  });

  it('reads a header of thousands of spaces between two tags', () => {
    expect(ifNoneMatchIncludes(request(`"a"${' '.repeat(16_000)}, "abc"`), '"abc"')).toBe(true);
    expect(ifNoneMatchIncludes(request(`"a"${' '.repeat(16_000)}"abc"`), '"abc"')).toBe(false);
  });
});
