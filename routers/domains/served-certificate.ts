import { checkServerIdentity, type PeerCertificate } from 'node:tls';
import { X509Certificate } from 'node:crypto';
import { OutboundError } from '../../adapters/outbound/http/outbound-error.ts';
import type { AppDeps } from '../context.ts';

/** The facts of a certificate that ssl-status reports, whichever mode produced it. */
export interface CertificateFacts {
  issuer: string | null;
  notBefore: Date | null;
  notAfter: Date | null;
  serialNumber: string | null;
  fingerprintSha256: string | null;
}

export const NO_CERTIFICATE: CertificateFacts = { issuer: null, notBefore: null, notAfter: null, serialNumber: null, fingerprintSha256: null };

const commonName = (subject: string) => /(?:^|\n)CN=([^\n]*)/.exec(subject)?.[1] ?? subject.split('\n')[0] ?? null;

/** The facts of a stored PEM certificate (acme mode). */
export function pemFacts(pem: string): CertificateFacts {
  const cert = new X509Certificate(pem);
  return {
    issuer: commonName(cert.issuer),
    notBefore: new Date(cert.validFrom),
    notAfter: new Date(cert.validTo),
    serialNumber: cert.serialNumber.toUpperCase(),
    fingerprintSha256: cert.fingerprint256,
  };
}

export type ServedVerdict = CertificateFacts & { status: 'pending' | 'issued' | 'failed'; reason: string | null };

/** How long one look at the proxy may take: ssl-status answers within it. */
const INSPECTION_TIMEOUT_MS = 5_000;

/**
 * Proxy mode: what the TLS-terminating proxy actually serves at `https://hostname:TLS_PROXY_PORT`, judged as a
 * browser would (chain, name, dates). The handshake goes through the guarded client, so a hostname that resolves to
 * a non-public address is refused like any other outbound call; resolution uses DNS_SERVERS, the same answers the
 * routing check saw. A failure to connect is `pending` (an on-demand proxy may still be obtaining it); a certificate
 * that a browser would refuse is `failed` with the reason.
 */
export async function inspectServedCertificate(deps: Pick<AppDeps, 'http' | 'dns' | 'config'>, hostname: string): Promise<ServedVerdict> {
  const origin = `https://${hostname}:${deps.config.TLS_PROXY_PORT}`;
  let served: Awaited<ReturnType<AppDeps['http']['inspectTls']>>;
  try {
    served = await deps.http.inspectTls(`${origin}/`, { timeoutMs: INSPECTION_TIMEOUT_MS, resolveAddresses: (name) => resolveAddresses(deps, name) });
  } catch (error) {
    const detail = error instanceof OutboundError ? error.message : 'the TLS handshake failed';
    return { ...NO_CERTIFICATE, status: 'pending', reason: `No certificate could be read at ${origin}: ${detail}` };
  }
  const facts = peerFacts(served.peer);
  const problem = judge(served, hostname, facts);
  return { ...facts, status: problem ? 'failed' : 'issued', reason: problem };
}

async function resolveAddresses(deps: Pick<AppDeps, 'dns'>, hostname: string) {
  const [a, aaaa] = await Promise.all([deps.dns.a(hostname), deps.dns.aaaa(hostname)]);
  const addresses = [...(a.status === 'found' ? a.records : []), ...(aaaa.status === 'found' ? aaaa.records : [])];
  if (addresses.length === 0 && (a.status === 'error' || aaaa.status === 'error')) {
    throw Object.assign(new Error('DNS did not answer'), { code: a.status === 'error' ? a.reason : 'EUNKNOWN' });
  }
  return addresses;
}

const firstOf = (value: string | string[] | undefined) => (Array.isArray(value) ? (value[0] ?? null) : (value ?? null));

function peerFacts(peer: PeerCertificate): CertificateFacts {
  return {
    issuer: firstOf(peer.issuer?.CN ?? peer.issuer?.O),
    notBefore: new Date(peer.valid_from),
    notAfter: new Date(peer.valid_to),
    serialNumber: peer.serialNumber?.toUpperCase() ?? null,
    fingerprintSha256: peer.fingerprint256 ?? null,
  };
}

function judge(served: { chainTrusted: boolean; chainError: string | null; peer: PeerCertificate }, hostname: string, facts: CertificateFacts) {
  const now = Date.now();
  if (facts.notAfter && facts.notAfter.getTime() <= now) return `The certificate served expired on ${facts.notAfter.toISOString()}`;
  if (facts.notBefore && facts.notBefore.getTime() > now) return `The certificate served is not valid before ${facts.notBefore.toISOString()}`;
  const mismatch = checkServerIdentity(hostname, served.peer);
  if (mismatch) return `The certificate served does not cover ${hostname} (it names ${served.peer.subjectaltname || 'no DNS names'})`;
  if (!served.chainTrusted) return `The certificate served is not trusted (${served.chainError ?? 'unknown issuer'})`;
  return null;
}
