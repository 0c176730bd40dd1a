import { connect, type PeerCertificate } from 'node:tls';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { acmeCaRunnable, reserveAcmeCa, type TestAcmeCa } from '../helpers/acme-ca.ts';
import { dnsServerRunnable, startDnsServer, type TestDnsServer } from '../helpers/dns-server.ts';
import { startTestApp, type TestApp } from '../helpers/test-app.ts';

/**
 * Certificates for custom domains from a real ACME CA (pebble) over HTTP-01 answered by the service's own
 * listener, served by SNI, renewed by the durable job, and refused before ordering when CAA forbids the CA.
 */

let dns: TestDnsServer;
let ca: TestAcmeCa;
let app: TestApp;
let owner: { token: string; ownerId: string };
let interfaceId: string;

async function activeDomain(hostname: string) {
  const domain = (await app.request('POST', '/api/v1/domains', { token: owner.token, body: { hostname, chatInterfaceId: interfaceId } })).body.data.domain;
  await dns.setTxt(`_svc-challenge.${hostname}`, domain.records[0].value);
  await dns.addA(hostname, ['127.0.0.1']);
  expect((await app.request('POST', `/api/v1/domains/${domain.id}/verify`, { token: owner.token })).body.data.verified).toBe(true);
  const active = await app.request('POST', `/api/v1/domains/${domain.id}/activate`, { token: owner.token });
  expect(active.status, active.text).toBe(200);
  return domain.id as string;
}

async function sslStatus(id: string, until: (ssl: { status: string; serialNumber: string | null }) => boolean) {
  let ssl: any;
  for (let i = 0; i < 300; i++) {
    const res = await app.request('GET', `/api/v1/domains/${id}/ssl-status`, { token: owner.token });
    expect(res.status, res.text).toBe(200);
    ssl = res.body.data.ssl;
    if (until(ssl)) return ssl;
    await new Promise((r) => setTimeout(r, 100));
  }
  return ssl;
}

function handshake(servername: string, rootPem: string) {
  return new Promise<{ authorized: boolean; error: string | undefined; cert: PeerCertificate }>((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port: app.port, servername, ca: rootPem, rejectUnauthorized: false }, () => {
      resolve({ authorized: socket.authorized, error: socket.authorizationError?.toString(), cert: socket.getPeerCertificate() });
      socket.end();
    });
    socket.on('error', reject);
  });
}

describe.skipIf(!acmeCaRunnable || !dnsServerRunnable)('domain certificates over ACME', () => {
  beforeAll(async () => {
    dns = await startDnsServer();
    const reserved = await reserveAcmeCa();
    app = await startTestApp({
      DNS_SERVERS: dns.address,
      DNS_TIMEOUT_MS: '1000',
      ACME_DIRECTORY_URL: reserved.directoryUrl,
      ACME_EMAIL: 'certs@example.com',
      ACME_CAA_IDENTITIES: 'pebble.test',
      OUTBOUND_CA_FILE: reserved.caFile,
      OUTBOUND_ALLOW_HOSTS: reserved.hostPort,
      // The tests poll ssl-status while the CA works; on a slow machine that outruns the default budget.
      RATE_LIMIT_DEFAULT: '100000',
    });
    ca = await reserved.start({ dnsServer: dns.address, httpPort: app.port });
    owner = await app.signUp('certs');
    const iface = await app.request('POST', '/api/v1/chat-interfaces', {
      token: owner.token,
      body: { name: 'Secure chat', endpointUrl: 'https://example.com/bot', public: true },
    });
    interfaceId = iface.body.data.chatInterface.id;
  });
  afterAll(async () => {
    await app?.stop();
    await ca?.close();
    await dns?.close();
  });

  it('an activated domain gets a certificate from the CA, served by SNI and trusted against the CA’s root', async () => {
    const id = await activeDomain('secure.shop-a.test');
    const ssl = await sslStatus(id, (s) => s.status === 'issued' || s.status === 'failed');
    expect(ssl, JSON.stringify(ssl)).toMatchObject({ hostname: 'secure.shop-a.test', mode: 'acme', status: 'issued', reason: null });
    expect(Date.parse(ssl.notAfter)).toBeGreaterThan(Date.now());
    expect(Date.parse(ssl.renewsAt)).toBeLessThan(Date.parse(ssl.notAfter));
    expect(ssl.fingerprintSha256).toMatch(/^([0-9A-F]{2}:){31}[0-9A-F]{2}$/);

    const root = await ca.issuedRoot();
    const served = await handshake('secure.shop-a.test', root);
    expect(served.authorized, served.error).toBe(true);
    expect(served.cert.subjectaltname).toContain('DNS:secure.shop-a.test');
    expect(served.cert.serialNumber.toUpperCase()).toBe(ssl.serialNumber);
    // Another name still gets the service's default certificate, which the CA's root does not sign.
    expect((await handshake('localhost', root)).authorized).toBe(false);
    // The key is stored sealed, never as PEM.
    const row = await app.deps.database.db.selectFrom('domain_certificates').select('key_enc').where('domain_id', '=', id).executeTakeFirstOrThrow();
    expect(row.key_enc).not.toContain('PRIVATE KEY');
  });

  it('renews through the durable job it queued, and serves the new certificate', async () => {
    const id = await activeDomain('renew.shop-a.test');
    const first = await sslStatus(id, (s) => s.status === 'issued');
    expect(first.status).toBe('issued');
    const root = await ca.issuedRoot();
    const before = (await handshake('renew.shop-a.test', root)).cert.serialNumber;
    // Time passes: the renewal job queued at two thirds of the lifetime is due now.
    const db = app.deps.database.db;
    const due = await sql<{
      n: number;
    }>`update jobs set run_at = now() where kind = 'domain.certificate' and status = 'queued' and payload->>'domainId' = ${id} returning 1 as n`.execute(db);
    expect(due.rows).toHaveLength(1);
    app.deps.jobs.notify();
    // Pebble's dates have one-second precision, so a renewal within the second shows only in the serial number.
    const renewed = await sslStatus(id, (s) => s.status === 'issued' && s.serialNumber !== first.serialNumber);
    expect(renewed.serialNumber).not.toBe(first.serialNumber);
    app.deps.domainCertificates.forget('renew.shop-a.test');
    const after = (await handshake('renew.shop-a.test', root)).cert.serialNumber;
    expect(after).not.toBe(before);
    expect(after.toUpperCase()).toBe(renewed.serialNumber);
  });

  it('a CAA record that forbids the CA ends in failed with that reason, without ordering', async () => {
    await dns.addCaa('shop-b.test', [{ tag: 'issue', value: 'other-ca.example' }]);
    const id = await activeDomain('caa.shop-b.test');
    const ssl = await sslStatus(id, (s) => s.status === 'failed' || s.status === 'issued');
    expect(ssl).toMatchObject({ status: 'failed', reason: expect.stringMatching(/CAA record of shop-b.test allows only other-ca.example/) });
  });

  it('a released hostname stops presenting its certificate at once: deleted, or taken over by another owner', async () => {
    const root = await ca.issuedRoot();
    const servesIssued = async (hostname: string) => (await handshake(hostname, root)).cert.subjectaltname?.includes(`DNS:${hostname}`) ?? false;

    const deleted = await activeDomain('gone.shop-a.test');
    expect((await sslStatus(deleted, (s) => s.status === 'issued' || s.status === 'failed')).status).toBe('issued');
    expect(await servesIssued('gone.shop-a.test')).toBe(true);
    expect((await app.request('DELETE', `/api/v1/domains/${deleted}`, { token: owner.token })).status).toBe(200);
    expect(await servesIssued('gone.shop-a.test')).toBe(false);

    const held = await activeDomain('taken.shop-a.test');
    expect((await sslStatus(held, (s) => s.status === 'issued' || s.status === 'failed')).status).toBe('issued');
    expect(await servesIssued('taken.shop-a.test')).toBe(true);
    const rival = await app.signUp('certs-rival');
    const rivalInterface = await app.request('POST', '/api/v1/chat-interfaces', {
      token: rival.token,
      body: { name: 'Rival chat', endpointUrl: 'https://example.com/bot', public: true },
    });
    const claim = await app.request('POST', '/api/v1/domains', {
      token: rival.token,
      body: { hostname: 'taken.shop-a.test', chatInterfaceId: rivalInterface.body.data.chatInterface.id },
    });
    expect(claim.status, claim.text).toBe(201);
    await dns.clearTxt('_svc-challenge.taken.shop-a.test');
    await dns.setTxt('_svc-challenge.taken.shop-a.test', claim.body.data.domain.records[0].value);
    const verified = await app.request('POST', `/api/v1/domains/${claim.body.data.domain.id}/verify`, { token: rival.token });
    expect(verified.body.data.verified, verified.text).toBe(true);
    expect(await servesIssued('taken.shop-a.test')).toBe(false);
  });

  it('ssl-status of another owner’s domain is a 404', async () => {
    const other = await app.signUp('certs-other');
    const id = (await app.request('GET', '/api/v1/domains', { token: owner.token })).body.data.domains[0].id;
    expect((await app.request('GET', `/api/v1/domains/${id}/ssl-status`, { token: other.token })).status).toBe(404);
    expect((await app.request('GET', `/api/v1/domains/${id}/ssl-status`)).status).toBe(401);
  });
});
