import type { DnsAnswer, DnsLookup } from '../../adapters/outbound/dns/resolver.ts';
import type { Config } from '../../schema/config.ts';
import { challengeName, challengeValue } from './hostname.ts';
import type { DomainRow } from './repository.ts';

type Observed = { status: 'ok' | 'missing' | 'mismatch' | 'error' | 'not_required'; found: string[]; reason: string | null };
export type DnsReport = {
  checkedAt: string;
  ownership: Observed;
  routing: Observed;
  cname: string[];
  a: string[];
  aaaa: string[];
  caa: Array<{ tag: string; value: string }>;
};

type RoutingConfig = Pick<Config, 'DOMAIN_CNAME_TARGET' | 'DOMAIN_ADDRESSES'>;
const lower = (name: string) => name.toLowerCase().replace(/\.$/, '');
const records = <T>(answer: DnsAnswer<T>) => (answer.status === 'found' ? answer.records : []);

/** The records an owner creates: the ownership TXT, and the routing record(s) this deployment is configured for. */
export function expectedRecords(domain: Pick<DomainRow, 'hostname' | 'verification_token'>, config: RoutingConfig) {
  const list: Array<{ type: 'TXT' | 'CNAME' | 'A' | 'AAAA'; name: string; value: string; purpose: 'ownership' | 'routing' }> = [
    { type: 'TXT', name: challengeName(domain.hostname), value: challengeValue(domain.verification_token), purpose: 'ownership' },
  ];
  if (config.DOMAIN_CNAME_TARGET) list.push({ type: 'CNAME', name: domain.hostname, value: lower(config.DOMAIN_CNAME_TARGET), purpose: 'routing' });
  for (const address of config.DOMAIN_ADDRESSES)
    list.push({ type: address.includes(':') ? 'AAAA' : 'A', name: domain.hostname, value: address, purpose: 'routing' });
  return list;
}

function observe(answer: DnsAnswer<string>, matches: (value: string) => boolean): Observed {
  if (answer.status === 'error') return { status: 'error', found: [], reason: answer.reason };
  if (answer.status === 'none') return { status: 'missing', found: [], reason: null };
  return { status: answer.records.some(matches) ? 'ok' : 'mismatch', found: answer.records, reason: null };
}

/** Only the ownership TXT record: what verify needs. */
export async function checkOwnership(dns: DnsLookup, domain: Pick<DomainRow, 'hostname' | 'verification_token'>): Promise<Observed> {
  const expected = challengeValue(domain.verification_token);
  return observe(await dns.txt(challengeName(domain.hostname)), (value) => value.trim() === expected);
}

/** Reads TXT, CNAME, A, AAAA and CAA for a domain and says how each compares with what is expected. Changes nothing. */
export async function inspectDns(
  dns: DnsLookup,
  domain: Pick<DomainRow, 'hostname' | 'verification_token'>,
  config: RoutingConfig,
  now = new Date(),
): Promise<DnsReport> {
  const [ownership, cname, a, aaaa, caa] = await Promise.all([
    checkOwnership(dns, domain),
    dns.cname(domain.hostname),
    dns.a(domain.hostname),
    dns.aaaa(domain.hostname),
    dns.caa(domain.hostname),
  ]);
  const target = config.DOMAIN_CNAME_TARGET ? lower(config.DOMAIN_CNAME_TARGET) : undefined;
  let routing: Observed;
  if (!target && config.DOMAIN_ADDRESSES.length === 0) routing = { status: 'not_required', found: [], reason: null };
  else if (target && cname.status === 'found') routing = observe(cname, (value) => lower(value) === target);
  else {
    const addresses = [...records(a), ...records(aaaa)];
    const failed = [cname, a, aaaa].find((answer) => answer.status === 'error');
    if (addresses.length > 0)
      routing = { status: addresses.some((x) => config.DOMAIN_ADDRESSES.includes(x)) ? 'ok' : 'mismatch', found: addresses, reason: null };
    else if (failed?.status === 'error') routing = { status: 'error', found: [], reason: failed.reason };
    else routing = { status: 'missing', found: [], reason: null };
  }
  return { checkedAt: now.toISOString(), ownership, routing, cname: records(cname).map(lower), a: records(a), aaaa: records(aaaa), caa: records(caa) };
}
