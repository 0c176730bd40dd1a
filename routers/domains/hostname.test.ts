import { describe, expect, it } from 'vitest';
import { normalizeHostname } from './hostname.ts';

describe('normalizeHostname', () => {
  it('lower-cases, trims the trailing dot, and converts IDNA to punycode', () => {
    expect(normalizeHostname(' Chat.Example.COM. ')).toEqual({ hostname: 'chat.example.com' });
    expect(normalizeHostname('bücher.example')).toEqual({ hostname: 'xn--bcher-kva.example' });
    expect(normalizeHostname('example.co.uk')).toEqual({ hostname: 'example.co.uk' });
  });
  it('refuses public suffixes, including private ones', () => {
    for (const suffix of ['com', 'co.uk', 'github.io', 'blogspot.com'])
      expect(normalizeHostname(suffix).problem, suffix).toBe(suffix === 'com' ? 'invalid' : 'public_suffix');
    expect(normalizeHostname('someone.github.io').problem).toBeUndefined();
  });
  it('refuses IP literals, localhost and what is not a DNS name', () => {
    for (const ip of ['127.0.0.1', '::1', '[::1]', '10.0.0.1']) expect(normalizeHostname(ip).problem, ip).toBe('ip_address');
    // IPv4 in the other forms a URL host accepts is an address too, named as the one it is.
    for (const [ip, address] of <Array<[string, string]>>[
      ['0x7f.1', '127.0.0.1'],
      ['2130706433', '127.0.0.1'],
      ['127.1', '127.0.0.1'],
      ['0177.0.0.1', '127.0.0.1'],
      ['1.2.3', '1.2.0.3'],
      ['0xA9.0xFE.0xA9.0xFE.', '169.254.169.254'],
    ])
      expect(normalizeHostname(ip), ip).toEqual({ hostname: address, problem: 'ip_address' });
    for (const host of ['localhost', 'app.localhost']) expect(normalizeHostname(host).problem, host).toBe('localhost');
    for (const bad of [
      '',
      'exa mple.com',
      'http://example.com',
      'a..b.com',
      '-x.example.com',
      'x'.repeat(64) + '.com',
      'user@example.com',
      'example.com/path',
    ]) {
      expect(normalizeHostname(bad).problem, bad).toBe('invalid');
    }
  });
});
