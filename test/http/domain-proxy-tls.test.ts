import { request as httpsRequest } from 'node:https';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dnsServerRunnable, startDnsServer, type TestDnsServer } from '../helpers/dns-server.ts';
import { startTestApp, type TestApp } from '../helpers/test-app.ts';
import { startTlsProxy, type TestTlsProxy } from '../helpers/tls-proxy.ts';

/**
 * TLS_MODE=proxy: a real TLS-terminating proxy in front of the service asks route-public before it issues a
 * certificate (on-demand TLS), relays visitors to the hosted page, and ssl-status reads what it serves with a
 * handshake through the guarded outbound client (which still refuses non-public addresses).
 */

let dns: TestDnsServer;
let proxy: TestTlsProxy;
let app: TestApp;
let owner: { token: string; ownerId: string };
let interfaceId: string;
let caDir: string | undefined;
const served = ['ok.shop-p.test', 'wrong.shop-p.test', 'self.shop-p.test', 'expired.shop-p.test', 'later.shop-p.test'];

async function addDomain(hostname: string) {
  const res = await app.request('POST', '/api/v1/domains', { token: owner.token, body: { hostname, chatInterfaceId: interfaceId } });
  expect(res.status, res.text).toBe(201);
  const domain = res.body.data.domain;
  await dns.setTxt(`_svc-challenge.${hostname}`, domain.records[0].value);
  await dns.addA(hostname, ['127.0.0.1']);
  expect((await app.request('POST', `/api/v1/domains/${domain.id}/verify`, { token: owner.token })).body.data.verified).toBe(true);
  return domain.id as string;
}

async function activeDomain(hostname: string) {
  const id = await addDomain(hostname);
  const active = await app.request('POST', `/api/v1/domains/${id}/activate`, { token: owner.token });
  expect(active.status, active.text).toBe(200);
  return id;
}

async function sslStatus(id: string) {
  const res = await app.request('GET', `/api/v1/domains/${id}/ssl-status`, { token: owner.token });
  expect(res.status, res.text).toBe(200);
  return res.body.data.ssl;
}

/** A visitor's browser: HTTPS to the proxy for `hostname`, verified against the proxy's CA. */
function visit(hostname: string) {
  return new Promise<{ status: number; body: string; serialNumber: string }>((resolve, reject) => {
    const req = httpsRequest({ host: '127.0.0.1', port: proxy.port, servername: hostname, path: '/', headers: { host: hostname }, ca: proxy.caPem }, (res) => {
      const serialNumber = (res.socket as import('node:tls').TLSSocket).getPeerCertificate().serialNumber;
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk) => {
        body += chunk;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body, serialNumber }));
    });
    req.on('error', reject);
    req.end();
  });
}

describe.skipIf(!dnsServerRunnable)('custom domains behind a TLS-terminating proxy (TLS_MODE=proxy)', () => {
  beforeAll(async () => {
    dns = await startDnsServer();
    proxy = await startTlsProxy();
    caDir = mkdtempSync(join(tmpdir(), 'proxy-ca-'));
    const caFile = join(caDir, 'ca.pem');
    writeFileSync(caFile, proxy.caPem);
    app = await startTestApp({
      TLS_MODE: 'proxy',
      TLS_PROXY_PORT: String(proxy.port),
      DNS_SERVERS: dns.address,
      DNS_TIMEOUT_MS: '1000',
      OUTBOUND_CA_FILE: caFile,
      // The test hostnames resolve to 127.0.0.1: only these may be reached; blocked.shop-p.test is left to the guard.
      OUTBOUND_ALLOW_HOSTS: served.map((h) => `${h}:${proxy.port}`).join(','),
      RATE_LIMIT_DEFAULT: '10000',
    });
    proxy.setBackend(app.port);
    owner = await app.signUp('proxy');
    const iface = await app.request('POST', '/api/v1/chat-interfaces', {
      token: owner.token,
      body: { name: 'Proxied chat', endpointUrl: 'https://example.com/bot', public: true },
    });
    interfaceId = iface.body.data.chatInterface.id;
  });
  afterAll(async () => {
    await app?.stop();
    await proxy?.close();
    await dns?.close();
    if (caDir) rmSync(caDir, { recursive: true, force: true });
  });

  it('the proxy gets a yes from route-public, a visitor gets the page through it, and ssl-status reports the certificate it serves', async () => {
    const id = await activeDomain('ok.shop-p.test');
    const page = await visit('ok.shop-p.test');
    expect(page.status).toBe(200);
    expect(page.body).toContain('Proxied chat');
    expect(proxy.asks).toContainEqual({ hostname: 'ok.shop-p.test', status: 200 });

    const ssl = await sslStatus(id);
    expect(ssl).toMatchObject({ hostname: 'ok.shop-p.test', mode: 'proxy', status: 'issued', reason: null, issuer: 'Test Proxy CA', renewsAt: null });
    expect(ssl.serialNumber).toBe(page.serialNumber.toUpperCase());
    expect(Date.parse(ssl.notAfter)).toBeGreaterThan(Date.now());
    expect(Math.abs(Date.parse(ssl.checkedAt) - Date.now())).toBeLessThan(60_000);
    // No ACME order in proxy mode: nothing is stored or queued for the domain.
    const stored = await app.deps.database.db.selectFrom('domain_certificates').select('domain_id').where('domain_id', '=', id).execute();
    expect(stored).toHaveLength(0);
  });

  it('before activation the proxy is refused by route-public and ssl-status says none without looking', async () => {
    const id = await addDomain('later.shop-p.test');
    await expect(visit('later.shop-p.test')).rejects.toThrow();
    expect(proxy.asks).toContainEqual({ hostname: 'later.shop-p.test', status: 404 });
    const asksBefore = proxy.asks.length;
    const ssl = await sslStatus(id);
    expect(ssl).toMatchObject({ mode: 'proxy', status: 'none', reason: expect.stringMatching(/once the domain is active/), checkedAt: null });
    expect(proxy.asks.length).toBe(asksBefore);
  });

  it('a certificate a browser would refuse is failed with the reason: another name, self-signed, expired', async () => {
    proxy.serve('wrong.shop-p.test', 'wrong-name');
    proxy.serve('self.shop-p.test', 'self-signed');
    proxy.serve('expired.shop-p.test', 'expired');
    const wrong = await sslStatus(await activeDomain('wrong.shop-p.test'));
    expect(wrong).toMatchObject({ status: 'failed', reason: expect.stringMatching(/does not cover wrong\.shop-p\.test .*someone-else\.example/) });
    const self = await sslStatus(await activeDomain('self.shop-p.test'));
    expect(self).toMatchObject({ status: 'failed', reason: expect.stringMatching(/not trusted/) });
    const expired = await sslStatus(await activeDomain('expired.shop-p.test'));
    expect(expired).toMatchObject({ status: 'failed', reason: expect.stringMatching(/expired on/) });
    expect(expired.serialNumber).toMatch(/^[0-9A-F]+$/);
  });

  it('a domain whose name resolves to a non-public address is not contacted: pending, with the guard’s reason', async () => {
    const id = await activeDomain('blocked.shop-p.test');
    const ssl = await sslStatus(id);
    expect(ssl).toMatchObject({ status: 'pending', reason: expect.stringMatching(/non-public address/), serialNumber: null });
    expect(proxy.asks.map((a) => a.hostname)).not.toContain('blocked.shop-p.test');
  });

  it('ssl-status of another owner’s domain is a 404, without a session a 401', async () => {
    const other = await app.signUp('proxy-other');
    const id = (await app.request('GET', '/api/v1/domains', { token: owner.token })).body.data.domains[0].id;
    expect((await app.request('GET', `/api/v1/domains/${id}/ssl-status`, { token: other.token })).status).toBe(404);
    expect((await app.request('GET', `/api/v1/domains/${id}/ssl-status`)).status).toBe(401);
  });
});
