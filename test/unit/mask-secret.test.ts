import { describe, expect, it } from 'vitest';
import { maskSecret } from '../../routers/debug/router.ts';

describe('maskSecret', () => {
  it('masks secrets of up to 8 characters entirely', () => {
    expect(maskSecret('')).toBe('');
    expect(maskSecret('a')).toBe('*');
    expect(maskSecret('abc')).toBe('***');
    expect(maskSecret('abcdefgh')).toBe('********');
  });

  it('keeps the first 3 and last 4 characters of longer ones', () => {
    expect(maskSecret('abcdefghi')).toBe('abc**fghi');
    expect(maskSecret('sk-1234567890abcdef')).toBe('sk-************cdef');
    expect(maskSecret('sk-' + 'x'.repeat(16) + 'WXYZ')).toBe('sk-' + '*'.repeat(16) + 'WXYZ');
    expect(maskSecret('sk-' + 'x'.repeat(100) + 'WXYZ')).toBe('sk-' + '*'.repeat(16) + 'WXYZ');
  });

  it('never contains the middle of the secret', () => {
    for (let length = 0; length <= 200; length++) {
      const secret = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789'.repeat(6).slice(0, length);
      const masked = maskSecret(secret);
      if (length <= 8) {
        expect(masked).toBe('*'.repeat(length));
        continue;
      }
      expect(masked.startsWith(secret.slice(0, 3)), String(length)).toBe(true);
      expect(masked.endsWith(secret.slice(-4)), String(length)).toBe(true);
      const middle = masked.slice(3, -4);
      expect(middle, String(length)).toMatch(/^\*+$/);
      expect(middle.length).toBe(Math.min(length - 7, 16));
    }
  });

  it('does not reveal the middle of a realistic key', () => {
    const key = 'sk-proj-SECRETMIDDLEPART-0123456789-tail';
    const masked = maskSecret(key);
    expect(masked).toBe('sk-****************tail');
    expect(masked).not.toContain('SECRET');
    expect(masked).not.toContain('proj');
  });
});
