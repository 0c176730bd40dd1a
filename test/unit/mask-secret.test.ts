import { describe, expect, it } from 'vitest';
import { maskSecret } from '../../routers/debug/router.ts';

describe('maskSecret', () => {
  it('masks keys shorter than 20 characters entirely, with a fixed number of stars', () => {
    expect(maskSecret('')).toBe('');
    for (const key of ['a', 'abc', 'abcdefgh', 'abcdefghi', 'sk-1234567890abcde']) expect(maskSecret(key)).toBe('********');
  });

  it('keeps the first 3 and last 4 characters of longer ones, with 16 stars whatever the length', () => {
    expect(maskSecret('sk-1234567890abcdefg')).toBe('sk-****************defg');
    expect(maskSecret(`sk-${'x'.repeat(100)}WXYZ`)).toBe(`sk-${'*'.repeat(16)}WXYZ`);
  });

  it('never shows more than 7 characters, nor half of the key, nor its middle', () => {
    for (let length = 0; length <= 200; length++) {
      const secret = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789'.repeat(6).slice(0, length);
      const masked = maskSecret(secret);
      const shown = masked.replaceAll('*', '');
      expect(shown.length, String(length)).toBeLessThanOrEqual(Math.min(7, Math.floor(length / 2)));
      if (shown.length > 0) {
        expect(masked.startsWith(secret.slice(0, 3)), String(length)).toBe(true);
        expect(masked.endsWith(secret.slice(-4)), String(length)).toBe(true);
        expect(masked.slice(3, -4), String(length)).toBe('*'.repeat(16));
      }
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
