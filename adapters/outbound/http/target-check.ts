/**
 * Where a request may go: the URL rules (http/https only, no credentials), the OUTBOUND_ALLOW_HOSTS exemptions, and
 * the host resolved and every answer checked against the address policy (address-policy.ts). The result is the
 * one address the connection is then pinned to (pinned-agents.ts).
 */
import { lookup as dnsLookup } from 'node:dns/promises';
import { isPublicAddress, parseIpLiteral } from './address-policy.ts';
import { errorCode, OutboundError } from './outbound-error.ts';

export interface Target {
  /** Passed as `host`: a literal is connected to directly, a hostname goes through the pinned lookup. */
  connectHost: string;
  address: string;
  family: 4 | 6;
  servername: string | undefined;
  /** host:port was allow-listed (the address policy was not applied). */
  exempt: boolean;
}

/** Checks targets against the address rule, exempting the allow-listed 'host:port' entries (throws on a malformed one). */
export function createTargetCheck(allowHosts: string[], onBlocked: ((refusal: { host: string }) => void) | undefined) {
  const allowed = new Set(
    allowHosts
      .map((entry) => entry.trim())
      .filter((entry) => entry !== '')
      .map(parseAllowEntry),
  );

  const blocked = (host: string, message: string) => {
    onBlocked?.({ host });
    return new OutboundError('blocked_address', message);
  };
  const systemAddresses = async (hostname: string) => (await dnsLookup(hostname, { all: true, verbatim: true })).map((a) => a.address);

  async function resolveTarget(url: URL, resolveAddresses: (hostname: string) => Promise<string[]> = systemAddresses): Promise<Target> {
    const hostname = stripBrackets(url.hostname);
    const port = effectivePort(url);
    const exempt = allowed.has(`${hostKey(hostname)}:${port}`);

    // Node skips DNS for literals, so the literal itself is what gets connected to.
    const literal = parseIpLiteral(hostname);
    if (literal !== null) {
      if (!exempt && !isPublicAddress(literal)) {
        throw blocked(hostname, `${describeOrigin(url)} is not a public address`);
      }
      return { connectHost: literal, address: literal, family: literal.includes(':') ? 6 : 4, servername: undefined, exempt };
    }

    let answers: string[];
    try {
      answers = await resolveAddresses(hostname);
    } catch (err) {
      throw new OutboundError('dns_failure', `could not resolve host ${hostname} (${errorCode(err) ?? 'lookup failed'})`);
    }
    const first = answers[0];
    if (first === undefined) throw new OutboundError('dns_failure', `host ${hostname} has no addresses`);
    // One bad answer refuses the host: otherwise an attacker mixes a public and
    // an internal record and wins whenever the internal one gets picked.
    // The address is deliberately left out of the message (no internal DNS oracle).
    for (const answer of answers) {
      const ip = parseIpLiteral(answer);
      if (ip === null || (!exempt && !isPublicAddress(ip))) {
        throw blocked(hostname, `host ${hostname} resolves to a non-public address`);
      }
    }
    return {
      connectHost: hostname,
      address: first,
      family: first.includes(':') ? 6 : 4,
      servername: hostname.replace(/\.$/, ''),
      exempt,
    };
  }

  function isAllowListed(urlText: string): boolean {
    try {
      const url = new URL(urlText);
      return allowed.has(`${hostKey(stripBrackets(url.hostname))}:${effectivePort(url)}`);
    } catch {
      return false;
    }
  }

  return { resolveTarget, isAllowListed };
}

export function validateUrl(text: string): URL {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new OutboundError('invalid_url', 'URL is not valid');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new OutboundError('invalid_url', `URL scheme ${url.protocol} is not allowed (http and https only)`);
  }
  // Credentials in URLs leak into logs and are a classic parser-confusion vector.
  if (url.username !== '' || url.password !== '') {
    throw new OutboundError('invalid_url', 'URL must not contain credentials');
  }
  if (url.hostname === '') throw new OutboundError('invalid_url', 'URL has no host');
  return url;
}

export function describeOrigin(url: URL): string {
  return `${url.protocol}//${url.hostname}:${effectivePort(url)}`;
}

export function effectivePort(url: URL): number {
  if (url.port !== '') return Number(url.port);
  return url.protocol === 'https:' ? 443 : 80;
}

function stripBrackets(host: string): string {
  return host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
}

/** Same key for an allow-list entry and a URL hostname, whatever the IP spelling. */
function hostKey(host: string): string {
  const lower = stripBrackets(host.toLowerCase());
  return parseIpLiteral(lower) ?? lower;
}

function parseAllowEntry(entry: string): string {
  const match = /^(\[[^\]]+\]|.+):(\d{1,5})$/.exec(entry);
  const port = Number(match?.[2]);
  if (match === null || match[1] === undefined || port < 1 || port > 65535) {
    throw new Error(`invalid allowHosts entry "${entry}": expected host:port`);
  }
  return `${hostKey(match[1])}:${port}`;
}
