import { describe, expect, it } from 'vitest';
import { createStreamCleaner, findIllFormedText, JsonTooDeepError, parseUntrustedJson, storableJson, toStorable } from './text-input.ts';

describe('findIllFormedText', () => {
  it('accepts ordinary text, astral characters (paired surrogates), numbers and bytes', () => {
    expect(findIllFormedText({ name: 'Café 😀', n: 3, nested: [{ a: 'ok' }], file: { bytes: Buffer.from([0, 0xd8]) } })).toBeNull();
    expect(findIllFormedText('plain')).toBeNull();
    expect(findIllFormedText(undefined)).toBeNull();
  });

  it('names the field holding a NUL', () => {
    expect(findIllFormedText({ name: 'a\u0000b' })).toEqual({ path: 'name', problem: expect.stringContaining('NUL') });
    expect(findIllFormedText({ documentIds: ['x', 'y\u0000'] })).toEqual({ path: 'documentIds.1', problem: expect.stringContaining('NUL') });
    expect(findIllFormedText('\u0000')).toEqual({ path: '(body)', problem: expect.stringContaining('NUL') });
  });

  it('finds lone high and low surrogates, anywhere in the string', () => {
    expect(findIllFormedText({ m: 'abc\ud800' })?.problem).toContain('surrogate');
    expect(findIllFormedText({ m: '\udc00abc' })?.problem).toContain('surrogate');
    expect(findIllFormedText({ m: 'a\ud800b' })?.problem).toContain('surrogate');
    expect(findIllFormedText({ m: '\ud83d\ude00' })).toBeNull();
  });

  it('checks object keys too', () => {
    expect(findIllFormedText({ data: { ['k\u0000']: 1 } })).toEqual({ path: 'data', problem: expect.stringContaining('key') });
  });

  it('bounds the walk: very deep nesting is refused, never a stack overflow', () => {
    let deep: unknown = 'leaf';
    for (let i = 0; i < 10_000; i++) deep = { d: deep };
    expect(findIllFormedText(deep)?.problem).toBe('is nested too deeply');
  });
});

describe('findIllFormedText on hostile shapes', () => {
  it('a huge array of numbers under deep nesting is walked without queuing the numbers', () => {
    let nested: unknown = Array.from({ length: 500_000 }, () => 0);
    for (let i = 0; i < 60; i++) nested = { n: nested };
    expect(findIllFormedText(nested)).toBeNull();
    (nested as { n: unknown }).n = ['ok', 'bad\u0000'];
    expect(findIllFormedText(nested)).toEqual({ path: 'n.1', problem: expect.stringContaining('NUL') });
  });
});

describe('toStorable', () => {
  it('drops NUL and replaces lone surrogates, at any depth and in keys, leaving good text alone', () => {
    expect(toStorable('a\u0000b\ud800c 😀')).toBe('ab\uFFFDc 😀');
    expect(toStorable({ text: 'x\u0000', sources: [{ ['k\udc00']: 'v\u0000', n: 1 }], usage: null })).toEqual({
      text: 'x',
      sources: [{ 'k\uFFFD': 'v', n: 1 }],
      usage: null,
    });
    const clean = { a: 'fine' };
    expect(toStorable(clean)).toEqual(clean);
  });
});

describe('createStreamCleaner', () => {
  it('joins to toStorable of the whole, however the text is cut', () => {
    const whole = 'a\u0000b 😀 c\ud800 d😀\udc00e\ud83d\u0000\ude00😀';
    for (let cut1 = 0; cut1 <= whole.length; cut1++) {
      for (let cut2 = cut1; cut2 <= whole.length; cut2++) {
        const cleaner = createStreamCleaner();
        const joined = [whole.slice(0, cut1), whole.slice(cut1, cut2), whole.slice(cut2)].map((piece) => cleaner.clean(piece)).join('') + cleaner.end();
        expect(joined, `${cut1}/${cut2}`).toBe(toStorable(whole));
      }
    }
  });

  it('ends a stream whose last piece is a high surrogate with U+FFFD', () => {
    const cleaner = createStreamCleaner();
    expect(cleaner.clean('x\ud83d')).toBe('x');
    expect(cleaner.end()).toBe('\uFFFD');
  });
});

describe('parseUntrustedJson', () => {
  const nested = (levels: number) => `${'['.repeat(levels)}${']'.repeat(levels)}`;

  it('parses JSON nesting up to 64 levels, however wide', () => {
    expect(parseUntrustedJson('{"a":[1,{"b":"c"}]}')).toEqual({ a: [1, { b: 'c' }] });
    expect(parseUntrustedJson('"text"')).toBe('text');
    expect(parseUntrustedJson('null')).toBeNull();
    expect(parseUntrustedJson(nested(64))).toHaveLength(1);
    expect(parseUntrustedJson(JSON.stringify(Array.from({ length: 100_000 }, (_, i) => ({ i }))))).toHaveLength(100_000);
  });

  it('refuses deeper JSON, and text that is not JSON, as a SyntaxError', () => {
    expect(() => parseUntrustedJson(nested(65))).toThrow(JsonTooDeepError);
    expect(() => parseUntrustedJson(`{"error":${'{"a":'.repeat(50_000)}1${'}'.repeat(50_001)}`)).toThrow('JSON nested more than 64 levels deep');
    expect(() => parseUntrustedJson(nested(65))).toThrow(SyntaxError);
    expect(() => parseUntrustedJson('{"a":')).toThrow(SyntaxError);
  });
});

describe('storableJson', () => {
  it('writes clean values exactly as JSON.stringify does, Dates by their toJSON and without undefined properties', () => {
    const value = { at: new Date(Date.UTC(2026, 10, 29)), list: [1, 'two', null, { three: true }], gone: undefined, emoji: '😀' };
    expect(storableJson(value)).toBe(JSON.stringify(value));
    expect(storableJson('text')).toBe('"text"');
    expect(storableJson(undefined)).toBeUndefined();
  });

  it('drops NUL and turns unpaired surrogates into U+FFFD, in strings and keys at any depth', () => {
    expect(JSON.parse(storableJson({ 'k\u0000ey': ['a\u0000b', { deep: `${'q'.repeat(3)}\ud83d` }] })!)).toEqual({ key: ['ab', { deep: 'qqq\uFFFD' }] });
    expect(JSON.parse(storableJson('\udc00x')!)).toBe('\uFFFDx');
  });
});
