import { describe, expect, it } from 'vitest';
import { usesHttps } from './url-policy.ts';

describe('usesHttps', () => {
  it('reads the scheme as URL parses it, in any case', () => {
    for (const url of ['https://hooks.example.com/x', 'HTTPS://hooks.example.com/x', 'HtTpS://hooks.example.com']) expect(usesHttps(url), url).toBe(true);
  });

  it('is false for plain http, other schemes and text that is no URL', () => {
    for (const url of ['http://hooks.example.com', 'HTTP://hooks.example.com', 'ftp://hooks.example.com', 'https-ish', ''])
      expect(usesHttps(url), url).toBe(false);
  });
});
