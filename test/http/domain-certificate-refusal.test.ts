import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RefusingAcmeCa, startRefusingAcmeCa } from '../helpers/acme-ca.ts';
import { dnsServerRunnable, startDnsServer, type TestDnsServer } from '../helpers/dns-server.ts';
import { startTestApp, type TestApp } from '../helpers/test-app.ts';
import { startWebhookReceiver, verifyDelivery, type WebhookReceiver } from '../helpers/webhook-receiver.ts';

/**
 * A CA that refuses the order in words pebble cannot send (a NUL, a lone surrogate): the certificate still ends
 * failed with the reason, made storable, and the owner's webhook hears of it. A file of its own: the ACME transport
 * is installed once per process, with the first app's outbound allow list (domain-certificates.test.ts's pebble).
 */

// The CA's own words, as a JSON problem document can carry them.
const DETAIL = 'Policy forbids issuing for refused.shop-c.test\u0000 (rule \uD800 7)';
const REASON = 'The CA did not issue: Policy forbids issuing for refused.shop-c.test (rule \uFFFD 7)';

let dns: TestDnsServer;
let ca: RefusingAcmeCa;
let receiver: WebhookReceiver;
let app: TestApp;

describe.skipIf(!dnsServerRunnable)('a CA that refuses the order', () => {
  beforeAll(async () => {
    dns = await startDnsServer();
    ca = await startRefusingAcmeCa(DETAIL);
    receiver = await startWebhookReceiver();
    app = await startTestApp({
      DNS_SERVERS: dns.address,
      DNS_TIMEOUT_MS: '1000',
      ACME_DIRECTORY_URL: ca.directoryUrl,
      ACME_EMAIL: 'certs@example.com',
      OUTBOUND_ALLOW_HOSTS: [ca.hostPort, receiver.hostPort].join(','),
      RATE_LIMIT_DEFAULT: '100000',
    });
  });
  afterAll(async () => {
    await app?.stop();
    await ca?.close();
    await receiver?.close();
    await dns?.close();
  });

  it('a refusal holding NUL and a lone surrogate ends in failed with the cleaned reason, and the webhook says so', async () => {
    const owner = await app.signUp('certs-refused');
    await app.setOwner(owner.ownerId, { plan: 'enterprise' });
    const hook = await app.request('POST', '/api/v1/enterprise/webhooks', {
      token: owner.token,
      body: { url: receiver.url, events: ['domain.certificate_failed'] },
    });
    expect(hook.status, hook.text).toBe(201);
    const iface = await app.request('POST', '/api/v1/chat-interfaces', {
      token: owner.token,
      body: { name: 'Refused chat', endpointUrl: 'https://example.com/bot', public: true },
    });
    const hostname = 'refused.shop-c.test';
    const added = await app.request('POST', '/api/v1/domains', { token: owner.token, body: { hostname, chatInterfaceId: iface.body.data.chatInterface.id } });
    expect(added.status, added.text).toBe(201);
    const domain = added.body.data.domain;
    await dns.setTxt(`_svc-challenge.${hostname}`, domain.records[0].value);
    await dns.addA(hostname, ['127.0.0.1']);
    expect((await app.request('POST', `/api/v1/domains/${domain.id}/verify`, { token: owner.token })).body.data.verified).toBe(true);
    const active = await app.request('POST', `/api/v1/domains/${domain.id}/activate`, { token: owner.token });
    expect(active.status, active.text).toBe(200);

    let ssl: any;
    for (let i = 0; i < 100; i++) {
      const res = await app.request('GET', `/api/v1/domains/${domain.id}/ssl-status`, { token: owner.token });
      expect(res.status, res.text).toBe(200);
      ssl = res.body.data.ssl;
      if (ssl.status === 'failed') break;
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(ssl).toMatchObject({ hostname, mode: 'acme', status: 'failed', reason: REASON });
    // It was the order the CA refused: the account was made first.
    expect(ca.requests).toEqual(expect.arrayContaining(['POST /account', 'POST /order']));

    const [delivery] = await receiver.waitFor(1);
    expect(verifyDelivery(hook.body.data.secret, delivery!)).toMatchObject({
      type: 'domain.certificate_failed',
      data: { id: domain.id, hostname, reason: REASON },
    });
  });
});
