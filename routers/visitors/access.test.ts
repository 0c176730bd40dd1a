import { describe, expect, it } from 'vitest';
import { originAllowed } from './access.ts';

describe('originAllowed', () => {
  const allowed = ['https://shop.example.com', 'http://localhost:8080', 'https://*.example.org'];

  it('accepts the listed origins exactly, whatever the case or a trailing slash', () => {
    expect(originAllowed('https://shop.example.com', allowed)).toBe(true);
    expect(originAllowed('HTTPS://SHOP.example.com/', allowed)).toBe(true);
    expect(originAllowed('http://localhost:8080', allowed)).toBe(true);
  });

  it('refuses another scheme, port or host', () => {
    expect(originAllowed('http://shop.example.com', allowed)).toBe(false);
    expect(originAllowed('https://shop.example.com:8443', allowed)).toBe(false);
    expect(originAllowed('http://localhost:8081', allowed)).toBe(false);
    expect(originAllowed('https://evil-shop.example.com', allowed)).toBe(false);
    expect(originAllowed('https://shop.example.com.evil.net', allowed)).toBe(false);
  });

  it('matches a wildcard entry against subdomains only, with its scheme and port', () => {
    expect(originAllowed('https://a.example.org', allowed)).toBe(true);
    expect(originAllowed('https://a.b.example.org', allowed)).toBe(true);
    expect(originAllowed('https://example.org', allowed)).toBe(false);
    expect(originAllowed('http://a.example.org', allowed)).toBe(false);
    expect(originAllowed('https://a.example.org:8443', allowed)).toBe(false);
    expect(originAllowed('https://aexample.org', allowed)).toBe(false);
  });

  it('refuses what is not an origin at all, and everything when nothing is allowed', () => {
    expect(originAllowed('null', allowed)).toBe(false);
    expect(originAllowed('', allowed)).toBe(false);
    expect(originAllowed('https://shop.example.com', [])).toBe(false);
  });
});
