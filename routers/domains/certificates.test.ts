import { describe, expect, it } from 'vitest';
import type { DnsAnswer, DnsLookup } from '../../adapters/outbound/dns/resolver.ts';
import { caaVerdict, renewalTime } from './certificates.ts';

type Caa = { tag: string; value: string };
const lookup = (records: Record<string, DnsAnswer<Caa>>): DnsLookup => {
  const none = async () => ({ status: 'none' as const });
  return { txt: none, cname: none, a: none, aaaa: none, caa: async (name) => records[name] ?? { status: 'none' } };
};
const found = (...records: Caa[]): DnsAnswer<Caa> => ({ status: 'found', records });

describe('caaVerdict', () => {
  it('allows any CA when no name up to the registrable domain has CAA records', async () => {
    expect(await caaVerdict(lookup({}), 'chat.shop.example.co.uk', ['letsencrypt.org'])).toEqual({ allowed: true });
  });
  it('the closest name with records decides', async () => {
    const dns = lookup({
      'shop.example.com': found({ tag: 'issue', value: 'letsencrypt.org' }),
      'example.com': found({ tag: 'issue', value: 'other.example' }),
    });
    expect(await caaVerdict(dns, 'chat.shop.example.com', ['letsencrypt.org'])).toEqual({ allowed: true });
    expect((await caaVerdict(dns, 'www.example.com', ['letsencrypt.org'])).allowed).toBe(false);
  });
  it('matches the issuer domain before its parameters, and refuses an empty issuer', async () => {
    expect(
      (
        await caaVerdict(lookup({ 'example.com': found({ tag: 'issue', value: 'letsencrypt.org; validationmethods=http-01' }) }), 'example.com', [
          'letsencrypt.org',
        ])
      ).allowed,
    ).toBe(true);
    const refused = await caaVerdict(lookup({ 'example.com': found({ tag: 'issue', value: ';' }) }), 'a.example.com', ['letsencrypt.org']);
    expect(refused).toEqual({ allowed: false, reason: 'The CAA record of example.com allows only (no CA)' });
  });
  it('only iodef records, or a failure to ask, do not refuse', async () => {
    expect(
      (await caaVerdict(lookup({ 'example.com': found({ tag: 'iodef', value: 'mailto:x@example.com' }) }), 'example.com', ['letsencrypt.org'])).allowed,
    ).toBe(true);
    expect((await caaVerdict(lookup({ 'example.com': { status: 'error', reason: 'ETIMEOUT' } }), 'example.com', ['letsencrypt.org'])).allowed).toBe(true);
  });
});

describe('renewalTime', () => {
  it('is two thirds into the lifetime', () => {
    expect(renewalTime(new Date('2026-01-01T00:00:00Z'), new Date('2026-04-01T00:00:00Z')).toISOString()).toBe('2026-03-02T00:00:00.000Z');
  });
});
