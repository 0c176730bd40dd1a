import { isIP } from 'node:net';
import { domainToASCII } from 'node:url';
import { parse } from 'tldts';

export type HostnameProblem = 'invalid' | 'ip_address' | 'localhost' | 'public_suffix';

/**
 * A hostname as the service keys it: trimmed, lower-cased, without a trailing dot, IDNA to punycode
 * (`bücher.example` -> `xn--bcher-kva.example`). Then refused when it cannot be an owner's domain: not a DNS name,
 * an IP literal, localhost, or a public suffix itself (`co.uk`, `github.io`; ICANN and private sections of the
 * Public Suffix List). An apex (`example.com`) or any subdomain of one is allowed.
 */
export function normalizeHostname(input: string): { hostname: string; problem?: HostnameProblem } {
  let raw = input.trim().toLowerCase();
  if (raw.endsWith('.')) raw = raw.slice(0, -1);
  if (raw.startsWith('[') && raw.endsWith(']')) raw = raw.slice(1, -1);
  if (isIP(raw) !== 0) return { hostname: raw, problem: 'ip_address' };
  const ascii = raw === '' || /[/:@?#\s\\]/.test(raw) ? '' : domainToASCII(raw);
  if (!ascii || ascii.length > 253) return { hostname: raw, problem: 'invalid' };
  // The conversion reads IPv4 as URLs do (`0x7f.1`, `2130706433`, `127.1` become 127.0.0.1): an address still.
  if (isIP(ascii) !== 0) return { hostname: ascii, problem: 'ip_address' };
  const labels = ascii.split('.');
  if (labels.at(-1) === 'localhost') return { hostname: ascii, problem: 'localhost' };
  if (labels.length < 2 || labels.some((l) => !/^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/.test(l))) return { hostname: ascii, problem: 'invalid' };
  if (/^\d+$/.test(labels.at(-1)!)) return { hostname: ascii, problem: 'invalid' };
  const parsed = parse(ascii, { allowPrivateDomains: true });
  if (!parsed.domain || parsed.publicSuffix === ascii) return { hostname: ascii, problem: 'public_suffix' };
  return { hostname: ascii };
}

/** Where the ownership TXT record goes. */
export const challengeName = (hostname: string) => `_svc-challenge.${hostname}`;
/** The TXT value that proves control: per domain, random, and never reused across domains. */
export const challengeValue = (token: string) => `svc-verify=${token}`;
