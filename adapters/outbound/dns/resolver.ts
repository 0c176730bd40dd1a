import { Resolver } from 'node:dns/promises';

/** A DNS answer: records found, an authoritative "no such records", or a failure to ask (never proof of absence). */
export type DnsAnswer<T> = { status: 'found'; records: T[] } | { status: 'none' } | { status: 'error'; reason: string };

export interface DnsLookup {
  txt(name: string): Promise<DnsAnswer<string>>;
  cname(name: string): Promise<DnsAnswer<string>>;
  a(name: string): Promise<DnsAnswer<string>>;
  aaaa(name: string): Promise<DnsAnswer<string>>;
  caa(name: string): Promise<DnsAnswer<{ tag: string; value: string }>>;
}

/** Codes that mean the name or the record type does not exist, as opposed to the question going unanswered. */
const ABSENT = new Set(['ENODATA', 'ENOTFOUND', 'NXDOMAIN']);

/**
 * Lookups through DNS_SERVERS (`host` or `host:port`; the system's resolvers when empty), one try with a deadline
 * each. Every failure becomes a value: callers decide what a failure to ask may change (never a working domain).
 */
export function createDnsLookup(options: { servers: string[]; timeoutMs: number }): DnsLookup {
  const resolver = new Resolver({ timeout: options.timeoutMs, tries: 2 });
  if (options.servers.length > 0) resolver.setServers(options.servers);
  async function ask<T>(run: () => Promise<T[]>): Promise<DnsAnswer<T>> {
    try {
      const records = await run();
      return records.length > 0 ? { status: 'found', records } : { status: 'none' };
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code ?? 'EUNKNOWN';
      return ABSENT.has(code) ? { status: 'none' } : { status: 'error', reason: code };
    }
  }
  return {
    txt: (name) => ask(async () => (await resolver.resolveTxt(name)).map((chunks) => chunks.join(''))),
    cname: (name) => ask(() => resolver.resolveCname(name)),
    a: (name) => ask(() => resolver.resolve4(name)),
    aaaa: (name) => ask(() => resolver.resolve6(name)),
    caa: (name) =>
      ask(async () =>
        (await resolver.resolveCaa(name)).flatMap((r) =>
          r.issue !== undefined
            ? [{ tag: 'issue', value: r.issue }]
            : r.issuewild !== undefined
              ? [{ tag: 'issuewild', value: r.issuewild }]
              : r.iodef !== undefined
                ? [{ tag: 'iodef', value: r.iodef }]
                : [],
        ),
      ),
  };
}
