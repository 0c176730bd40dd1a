import type { GuardedHttpClient } from '../http/guarded-client.ts';

type AcmeClient = typeof import('acme-client');

/**
 * acme-client (the CA protocol, keys and CSRs) with its HTTP sent through the one SSRF-guarded client: its axios
 * instance gets an adapter that calls ours. The CA is operator configuration (ACME_DIRECTORY_URL); a private CA's
 * root is trusted through OUTBOUND_CA_FILE, never by turning verification off.
 */
let transport: { http: GuardedHttpClient; timeoutMs: number } | undefined;
export function installAcmeTransport(http: GuardedHttpClient, timeoutMs: number): void {
  if (transport) return;
  transport = { http, timeoutMs };
  // Loaded before this call (not the service's order, which installs at start-up): guard it now.
  if (loaded)
    loaded = loaded.then((acme) => {
      sendThroughGuard(acme, http, timeoutMs);
      return acme;
    });
}

/**
 * acme-client and its axios are loaded on the first certificate order (~270 ms and a few MB that a service with
 * TLS_MODE other than acme never needs), with the guarded transport installed before any request can be made.
 */
let loaded: Promise<AcmeClient> | undefined;
function loadAcme(): Promise<AcmeClient> {
  loaded ??= import('acme-client').then((acme) => {
    if (transport) sendThroughGuard(acme, transport.http, transport.timeoutMs);
    return acme;
  });
  return loaded;
}

function sendThroughGuard(acme: AcmeClient, http: GuardedHttpClient, timeoutMs: number): void {
  acme.axios.defaults.adapter = async (config) => {
    const headers: Record<string, string> = {};
    const given = (config.headers as { toJSON?: () => Record<string, unknown> } | undefined)?.toJSON?.() ?? {};
    for (const [name, value] of Object.entries(given)) if (value !== undefined && value !== null) headers[name] = String(value);
    const url = new URL(config.url ?? '', config.baseURL).toString();
    const response = await http.request(url, {
      method: (config.method ?? 'get').toUpperCase(),
      headers,
      body: typeof config.data === 'string' ? config.data : undefined,
      timeoutMs,
    });
    const responseHeaders: Record<string, string> = {};
    for (const [name, value] of Object.entries(response.headers))
      if (value !== undefined) responseHeaders[name] = Array.isArray(value) ? value.join(', ') : value;
    return { data: response.text(), status: response.status, statusText: '', headers: responseHeaders, config, request: {} };
  };
}

export interface IssuedCertificate {
  certPem: string;
  keyPem: string;
  notBefore: Date;
  notAfter: Date;
  issuer: string;
}

/** An ACME account key (ECDSA P-256), PEM. */
export const createAccountKey = async () => (await (await loadAcme()).crypto.createPrivateEcdsaKey('P-256')).toString();

/**
 * Orders a certificate for one hostname with the HTTP-01 challenge. `publish` makes the key authorization
 * answerable at /.well-known/acme-challenge/<token> on every instance; `unpublish` removes it afterwards.
 */
export async function orderCertificate(options: {
  directoryUrl: string;
  accountKey: string;
  accountUrl: string | null;
  email?: string;
  hostname: string;
  publish(token: string, keyAuthorization: string): Promise<void>;
  unpublish(token: string): Promise<void>;
}): Promise<IssuedCertificate & { accountUrl: string }> {
  const acme = await loadAcme();
  const client = new acme.Client({
    directoryUrl: options.directoryUrl,
    accountKey: options.accountKey,
    ...(options.accountUrl ? { accountUrl: options.accountUrl } : {}),
    backoffAttempts: 10,
    backoffMin: 500,
    backoffMax: 5_000,
  });
  const [key, csr] = await acme.crypto.createCsr(
    { commonName: options.hostname, altNames: [options.hostname] },
    await acme.crypto.createPrivateEcdsaKey('P-256'),
  );
  const certPem = await client.auto({
    csr,
    ...(options.email ? { email: options.email } : {}),
    termsOfServiceAgreed: true,
    challengePriority: ['http-01'],
    // The CA checks reachability itself; our own pre-check would be an outbound call to the owner's host.
    skipChallengeVerification: true,
    challengeCreateFn: async (_authz, challenge, keyAuthorization) => {
      if (challenge.type !== 'http-01') throw new Error(`unsupported challenge ${challenge.type}`);
      await options.publish(challenge.token, keyAuthorization);
    },
    challengeRemoveFn: async (_authz, challenge) => {
      await options.unpublish(challenge.token);
    },
  });
  const info = acme.crypto.readCertificateInfo(certPem);
  return {
    certPem,
    keyPem: key.toString(),
    notBefore: info.notBefore,
    notAfter: info.notAfter,
    issuer: info.issuer.commonName ?? '',
    accountUrl: client.getAccountUrl(),
  };
}
