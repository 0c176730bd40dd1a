import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dnsServerRunnable, startDnsServer, type TestDnsServer } from '../helpers/dns-server.ts';
import { startTestApp, type TestApp } from '../helpers/test-app.ts';
import { startWebhookReceiver, type WebhookReceiver } from '../helpers/webhook-receiver.ts';

/**
 * Custom domains through the real listener, with a real DNS server (pebble-challtestsrv) answering the service's
 * lookups: the records to create, verification by TXT, the claim rule between two owners, activation, the public
 * route and reserved checks, serving the hosted page by Host, and isolation.
 */

let dns: TestDnsServer;
let receiver: WebhookReceiver;
let app: TestApp;
let a: { token: string; ownerId: string };
let b: { token: string; ownerId: string };
let adminToken: string;
let aInterface: { id: string; slug: string };
let bInterface: { id: string; slug: string };
const CNAME_TARGET = 'edge.chat-service.test';

async function publicInterface(token: string, name: string) {
  const res = await app.request('POST', '/api/v1/chat-interfaces', { token, body: { name, endpointUrl: 'https://example.com/bot', public: true } });
  expect(res.status, res.text).toBe(201);
  return { id: res.body.data.chatInterface.id as string, slug: res.body.data.chatInterface.slug as string };
}
const addDomain = (token: string, hostname: string, chatInterfaceId: string) =>
  app.request('POST', '/api/v1/domains', { token, body: { hostname, chatInterfaceId } });
/** Polls until `done` holds (background jobs), bounded at 10 s. */
async function until<T>(read: () => Promise<T>, done: (value: T) => boolean): Promise<T> {
  for (let i = 0; ; i++) {
    const value = await read();
    if (done(value) || i >= 200) return value;
    await new Promise((r) => setTimeout(r, 50));
  }
}
const txtOf = (domain: { records: Array<{ type: string; name: string; value: string }> }) => domain.records.find((r) => r.type === 'TXT')!;

describe.skipIf(!dnsServerRunnable)('custom domains', () => {
  beforeAll(async () => {
    dns = await startDnsServer();
    receiver = await startWebhookReceiver();
    app = await startTestApp({
      DNS_SERVERS: dns.address,
      DNS_TIMEOUT_MS: '1000',
      DOMAIN_CNAME_TARGET: CNAME_TARGET,
      DOMAIN_ADDRESSES: '203.0.113.10',
      RESERVED_HOSTNAMES: 'chat-service.test',
      ADMIN_EMAILS: 'domains-admin@example.com',
      RATE_LIMIT_DEFAULT: '1000',
      OUTBOUND_ALLOW_HOSTS: receiver.hostPort,
    });
    a = await app.signUp('domains-a');
    b = await app.signUp('domains-b');
    adminToken = (await app.request('POST', '/api/v1/auth/sign-up', { body: { email: 'domains-admin@example.com', password: 'long enough pw' } })).body.data
      .token;
    aInterface = await publicInterface(a.token, 'A support');
    bInterface = await publicInterface(b.token, 'B support');
  });
  afterAll(async () => {
    await app?.stop();
    await dns?.close();
    await receiver?.close();
  });

  it('adds a domain (normalised) and lists the records to create', async () => {
    const res = await addDomain(a.token, ' Help.Example-Shop.TEST. ', aInterface.id);
    expect(res.status, res.text).toBe(201);
    const domain = res.body.data.domain;
    expect(domain).toMatchObject({ hostname: 'help.example-shop.test', status: 'pending_verification', chatInterfaceId: aInterface.id, verifiedAt: null });
    expect(domain.records).toEqual([
      { type: 'TXT', name: '_svc-challenge.help.example-shop.test', value: expect.stringMatching(/^svc-verify=[0-9a-f]{32}$/), purpose: 'ownership' },
      { type: 'CNAME', name: 'help.example-shop.test', value: CNAME_TARGET, purpose: 'routing' },
      { type: 'A', name: 'help.example-shop.test', value: '203.0.113.10', purpose: 'routing' },
    ]);
    const records = await app.request('GET', `/api/v1/domains/${domain.id}/verification-records`, { token: a.token });
    expect(records.body.data.records).toEqual(domain.records);
    expect((await addDomain(a.token, 'help.example-shop.test', aInterface.id)).status).toBe(409);
    const idn = await addDomain(a.token, 'bücher.example-shop.test', aInterface.id);
    expect(idn.body.data.domain.hostname).toBe('xn--bcher-kva.example-shop.test');
  });

  it('refuses hostnames that cannot be an owner’s, naming why', async () => {
    const cases: Array<[string, RegExp]> = [
      ['co.uk', /public suffix/],
      ['github.io', /public suffix/],
      ['127.0.0.1', /IP address/],
      ['localhost', /localhost/],
      ['not a host', /not a valid DNS hostname/],
      ['x.chat-service.test', /reserved/],
      [CNAME_TARGET, /reserved/],
    ];
    for (const [hostname, reason] of cases) {
      const res = await addDomain(a.token, hostname, aInterface.id);
      expect(res.status, hostname).toBe(400);
      expect(res.body.error.details, hostname).toMatch(reason);
    }
    expect((await addDomain(a.token, 'ok.example-shop.test', bInterface.id)).status).toBe(404);
    expect((await app.request('POST', '/api/v1/domains', { token: a.token, body: { hostname: 'y.example-shop.test' } })).status).toBe(400);
  });

  it('verifies by TXT (idempotent), activates, serves the hosted page by Host, and deactivates', async () => {
    const hook = await app.request('PATCH', `/api/v1/admin/owners/${a.ownerId}`, { token: adminToken, body: { plan: 'enterprise' } });
    expect(hook.status).toBe(200);
    await app.request('POST', '/api/v1/enterprise/webhooks', {
      token: a.token,
      body: { url: `${receiver.url}/d`, events: ['domain.verified', 'domain.activated', 'domain.deactivated'] },
    });

    const domain = (await addDomain(a.token, 'chat.shop-a.test', aInterface.id)).body.data.domain;
    const early = await app.request('POST', `/api/v1/domains/${domain.id}/verify`, { token: a.token });
    expect(early.status, early.text).toBe(200);
    expect(early.body.data).toMatchObject({ verified: false, ownership: { status: 'missing' }, domain: { status: 'pending_verification' } });
    expect(early.body.data.domain.statusReason).toMatch(/not found/);
    expect((await app.request('POST', `/api/v1/domains/${domain.id}/activate`, { token: a.token })).status).toBe(409);

    await dns.setTxt('_svc-challenge.chat.shop-a.test', 'svc-verify=someone-else');
    const wrong = await app.request('POST', `/api/v1/domains/${domain.id}/verify`, { token: a.token });
    expect(wrong.body.data).toMatchObject({ verified: false, ownership: { status: 'mismatch', found: ['svc-verify=someone-else'] } });

    await dns.setTxt('_svc-challenge.chat.shop-a.test', txtOf(domain).value);
    const ok = await app.request('POST', `/api/v1/domains/${domain.id}/verify`, { token: a.token });
    expect(ok.body.data).toMatchObject({ verified: true, ownership: { status: 'ok' }, domain: { status: 'verified' } });
    expect(ok.body.data.domain.lastDns.ownership.status).toBe('ok');
    const again = await app.request('POST', `/api/v1/domains/${domain.id}/verify`, { token: a.token });
    expect(again.body.data).toMatchObject({ verified: true, domain: { status: 'verified', verifiedAt: ok.body.data.domain.verifiedAt } });

    await dns.setCname('chat.shop-a.test', CNAME_TARGET);
    const report = await app.request('GET', `/api/v1/domains/${domain.id}/check-dns`, { token: a.token });
    expect(report.status, report.text).toBe(200);
    expect(report.body.data.dns).toMatchObject({ ownership: { status: 'ok' }, routing: { status: 'ok', found: [CNAME_TARGET] }, cname: [CNAME_TARGET] });

    const before = await app.request('GET', '/', { headers: { host: 'chat.shop-a.test' } });
    expect(before.status).toBe(404);
    expect(before.text).toContain('not active');
    expect((await app.request('GET', '/api/v1/domains/route-public?domain=chat.shop-a.test')).status).toBe(404);

    const active = await app.request('POST', `/api/v1/domains/${domain.id}/activate`, { token: a.token });
    expect(active.status, active.text).toBe(200);
    expect(active.body.data.domain).toMatchObject({ status: 'active', activatedAt: expect.any(String) });
    const route = await app.request('GET', '/api/v1/domains/route-public?domain=CHAT.shop-a.test');
    expect(route.status, route.text).toBe(200);
    expect(route.body.data).toEqual({
      domain: 'chat.shop-a.test',
      chatInterface: { slug: aInterface.slug, name: 'A support' },
      pageUrl: 'https://chat.shop-a.test/',
    });
    const page = await app.request('GET', '/', { headers: { host: 'chat.shop-a.test' } });
    expect(page.status).toBe(200);
    expect(page.text).toContain(`data-slug="${aInterface.slug}"`);
    expect(page.text).toContain('<title>A support');
    const routing = await app.request('GET', '/api/v1/domains-routing', { token: a.token });
    expect(routing.body.data.routes).toContainEqual({
      hostname: 'chat.shop-a.test',
      status: 'active',
      chatInterfaceId: aInterface.id,
      chatInterfaceSlug: aInterface.slug,
      serving: true,
    });

    const off = await app.request('POST', `/api/v1/domains/${domain.id}/deactivate`, { token: a.token });
    expect(off.body.data.domain.status).toBe('inactive');
    expect((await app.request('POST', `/api/v1/domains/${domain.id}/deactivate`, { token: a.token })).status).toBe(200);
    expect((await app.request('GET', '/', { headers: { host: 'chat.shop-a.test' } })).status).toBe(404);
    expect((await app.request('GET', '/api/v1/domains/route-public?domain=chat.shop-a.test')).status).toBe(404);
    expect((await app.request('POST', `/api/v1/domains/${domain.id}/activate`, { token: a.token })).body.data.domain.status).toBe('active');

    const types = async () => {
      for (let i = 0; i < 100; i++) {
        const seen = receiver.received
          .map((r) => JSON.parse(r.body))
          .filter((e) => e.data?.hostname === 'chat.shop-a.test')
          .map((e) => e.type);
        if (seen.length >= 4) return seen;
        await new Promise((r) => setTimeout(r, 50));
      }
      return [];
    };
    expect((await types()).sort()).toEqual(['domain.activated', 'domain.activated', 'domain.deactivated', 'domain.verified']);
  });

  it('an active domain serves its own interface only: another owner’s slug there is the plain 404 page', async () => {
    const domain = (await addDomain(a.token, 'own.shop-a.test', aInterface.id)).body.data.domain;
    await dns.setTxt('_svc-challenge.own.shop-a.test', txtOf(domain).value);
    expect((await app.request('POST', `/api/v1/domains/${domain.id}/verify`, { token: a.token })).body.data.verified).toBe(true);
    expect((await app.request('POST', `/api/v1/domains/${domain.id}/activate`, { token: a.token })).status).toBe(200);
    const at = (path: string) => app.request('GET', path, { headers: { host: 'own.shop-a.test' } });

    const own = await at(`/c/${aInterface.slug}`);
    expect(own.status).toBe(200);
    expect(own.text).toContain(`data-slug="${aInterface.slug}"`);
    expect((await at(`/c/${aInterface.slug}?embed=1`)).status).toBe(200);
    for (const path of [`/c/${bInterface.slug}`, `/c/${bInterface.slug}/`, `/c/${bInterface.slug}?embed=1`, '/c/no-such-slug']) {
      const other = await at(path);
      expect(other.status, path).toBe(404);
      expect(other.text, path).not.toContain('data-slug');
      expect(other.text, path).toContain('not served at this domain');
    }
    // What every owner's page needs is served there too; the service's own host still serves every public page.
    expect((await at('/widget.js')).status).toBe(200);
    const asset = /href="(\/widget\/assets\/[^"]+)"/.exec(own.text)![1]!;
    expect((await at(asset)).status).toBe(200);
    expect((await app.request('GET', `/c/${bInterface.slug}`)).status).toBe(200);

    // Not serving: no page at all, its own included.
    expect((await app.request('POST', `/api/v1/domains/${domain.id}/deactivate`, { token: a.token })).status).toBe(200);
    for (const path of [`/c/${aInterface.slug}`, `/c/${bInterface.slug}`]) {
      const off = await at(path);
      expect(off.status, path).toBe(404);
      expect(off.text, path).not.toContain('data-slug');
    }
  });

  it('a domain still pending verification gets the plain 404 page at /, not the service’s redirect', async () => {
    await addDomain(b.token, 'waiting.shop-b.test', bInterface.id);
    const root = await app.request('GET', '/', { headers: { host: 'waiting.shop-b.test' } });
    expect(root.status).toBe(404);
    expect(root.text).toContain('not active');
    expect(root.headers.location).toBeUndefined();
    // Without PUBLIC_ORIGINS the name may be the service's own (anyone may add any name): its pages stay up.
    expect((await app.request('GET', `/c/${aInterface.slug}`, { headers: { host: 'waiting.shop-b.test' } })).status).toBe(200);
    const peer = await app.startPeer({ PUBLIC_ORIGINS: 'https://chat-service.test' });
    try {
      for (const path of ['/', `/c/${bInterface.slug}`]) {
        const res = await peer.request('GET', path, { headers: { host: 'waiting.shop-b.test' } });
        expect(res.status, path).toBe(404);
        expect(res.text, path).toContain('not active');
      }
    } finally {
      await peer.stop();
    }
  });

  it('a change to the interface applies on the very next request despite the route cache: public, private, slug, deletion', async () => {
    const iface = await publicInterface(a.token, 'Cached route');
    const domain = (await addDomain(a.token, 'cached.shop-a.test', iface.id)).body.data.domain;
    await dns.setTxt('_svc-challenge.cached.shop-a.test', txtOf(domain).value);
    expect((await app.request('POST', `/api/v1/domains/${domain.id}/verify`, { token: a.token })).body.data.verified).toBe(true);
    expect((await app.request('POST', `/api/v1/domains/${domain.id}/activate`, { token: a.token })).status).toBe(200);
    const page = () => app.request('GET', '/', { headers: { host: 'cached.shop-a.test' } });
    const route = () => app.request('GET', '/api/v1/domains/route-public?domain=cached.shop-a.test');
    // The id as the client may write it, in capitals: it names the same interface, whose routes must go too.
    const patch = async (body: Record<string, unknown>) => {
      const res = await app.request('PATCH', `/api/v1/chat-interfaces/${iface.id.toUpperCase()}`, { token: a.token, body });
      expect(res.status, res.text).toBe(200);
    };
    expect((await page()).status).toBe(200);
    expect((await route()).status).toBe(200);

    await patch({ public: false });
    expect((await page()).status).toBe(404);
    expect((await route()).status).toBe(404);
    // Both answers are cached as misses now: making the interface public must drop them.
    await patch({ public: true });
    expect((await page()).status).toBe(200);
    const again = await route();
    expect(again.status, again.text).toBe(200);
    expect(again.body.data.chatInterface.slug).toBe(iface.slug);

    const slug = `cached-route-${Date.now()}`;
    await patch({ slug });
    expect((await page()).text).toContain(`data-slug="${slug}"`);
    expect((await route()).body.data.chatInterface.slug).toBe(slug);

    expect((await app.request('DELETE', `/api/v1/chat-interfaces/${iface.id.toUpperCase()}`, { token: a.token })).status).toBe(200);
    expect((await page()).status).toBe(404);
    expect((await route()).status).toBe(404);
  });

  it('a failure to ask DNS is reported as such and changes no state', async () => {
    const domain = (await addDomain(a.token, 'flaky.shop-a.test', aInterface.id)).body.data.domain;
    await dns.servfail('_svc-challenge.flaky.shop-a.test');
    const res = await app.request('POST', `/api/v1/domains/${domain.id}/verify`, { token: a.token });
    expect(res.status).toBe(200);
    expect(res.body.data).toMatchObject({ verified: false, ownership: { status: 'error' }, domain: { status: 'pending_verification' } });
    expect(res.body.data.domain.statusReason).toMatch(/DNS could not be asked/);
    await dns.clearServfail('_svc-challenge.flaky.shop-a.test');
  });

  it('DNS answers holding a NUL byte are stored cleaned, and the domain is still judged on the real values', async () => {
    const domain = (await addDomain(a.token, 'nul.shop-a.test', aInterface.id)).body.data.domain;
    await dns.setTxt('_svc-challenge.nul.shop-a.test', 'svc-verify=abc\u0000def');
    const wrong = await app.request('POST', `/api/v1/domains/${domain.id}/verify`, { token: a.token });
    expect(wrong.status, wrong.text).toBe(200);
    expect(wrong.body.data).toMatchObject({ verified: false, ownership: { status: 'mismatch' } });
    expect(wrong.body.data.domain.lastDns.ownership.found).toEqual(['svc-verify=abcdef']);

    await dns.setTxt('_svc-challenge.nul.shop-a.test', txtOf(domain).value);
    const ok = await app.request('POST', `/api/v1/domains/${domain.id}/verify`, { token: a.token });
    expect(ok.status, ok.text).toBe(200);
    expect(ok.body.data).toMatchObject({ verified: true, domain: { status: 'verified' } });
    expect([...ok.body.data.domain.lastDns.ownership.found].sort()).toEqual([txtOf(domain).value, 'svc-verify=abcdef'].sort());

    // The background re-check (a job that used to fail on every attempt and die) stores the same answers.
    expect((await app.request('POST', '/api/v1/domains/sync', { token: a.token })).status).toBe(202);
    const after = await until(
      async () => (await app.request('GET', `/api/v1/domains/${domain.id}`, { token: a.token })).body.data.domain,
      (d) => d.lastDns.checkedAt !== ok.body.data.domain.lastDns.checkedAt,
    );
    expect(after.lastDns.checkedAt).not.toBe(ok.body.data.domain.lastDns.checkedAt);
    expect(after.lastDns.ownership).toMatchObject({ status: 'ok', found: expect.arrayContaining(['svc-verify=abcdef']) });
  });

  it('a hostname held by one owner is taken over by another only by proving DNS control', async () => {
    const held = (await addDomain(a.token, 'contested.shop.test', aInterface.id)).body.data.domain;
    await dns.setTxt('_svc-challenge.contested.shop.test', txtOf(held).value);
    expect((await app.request('POST', `/api/v1/domains/${held.id}/verify`, { token: a.token })).body.data.verified).toBe(true);
    expect((await app.request('GET', '/api/v1/domains/check-reserved?domain=contested.shop.test')).body.data).toEqual({
      domain: 'contested.shop.test',
      available: false,
      reason: 'claimed',
    });

    const rival = await addDomain(b.token, 'contested.shop.test', bInterface.id);
    expect(rival.status).toBe(201);
    expect(rival.body.data.domain.statusReason).toMatch(/Another account holds this hostname/);
    // B cannot verify with A's record...
    expect((await app.request('POST', `/api/v1/domains/${rival.body.data.domain.id}/verify`, { token: b.token })).body.data.verified).toBe(false);
    expect((await app.request('GET', `/api/v1/domains/${held.id}`, { token: a.token })).body.data.domain.status).toBe('verified');
    // ...but once the DNS shows B's record, B holds it and A's goes back to pending, saying why.
    await dns.setTxt('_svc-challenge.contested.shop.test', txtOf(rival.body.data.domain).value);
    expect((await app.request('POST', `/api/v1/domains/${rival.body.data.domain.id}/verify`, { token: b.token })).body.data.verified).toBe(true);
    const lost = (await app.request('GET', `/api/v1/domains/${held.id}`, { token: a.token })).body.data.domain;
    expect(lost).toMatchObject({ status: 'pending_verification', statusReason: 'Another account proved control of this hostname', verifiedAt: null });
  });

  it('two owners proving the same hostname at the same moment: both answered, one holder, never a 5xx', async () => {
    for (let round = 0; round < 6; round++) {
      const hostname = `race${round}.shop.test`;
      const mine = (await addDomain(a.token, hostname, aInterface.id)).body.data.domain;
      const theirs = (await addDomain(b.token, hostname, bInterface.id)).body.data.domain;
      await dns.setTxt(`_svc-challenge.${hostname}`, txtOf(mine).value);
      await dns.setTxt(`_svc-challenge.${hostname}`, txtOf(theirs).value);
      const [one, two] = await Promise.all([
        app.request('POST', `/api/v1/domains/${mine.id}/verify`, { token: a.token }),
        app.request('POST', `/api/v1/domains/${theirs.id}/verify`, { token: b.token }),
      ]);
      expect([one.status, two.status], `${one.text} ${two.text}`).toEqual([200, 200]);
      // Whichever went second took the hostname over (it proved control too): exactly one holds it.
      const statuses = [
        (await app.request('GET', `/api/v1/domains/${mine.id}`, { token: a.token })).body.data.domain.status,
        (await app.request('GET', `/api/v1/domains/${theirs.id}`, { token: b.token })).body.data.domain.status,
      ];
      expect(
        statuses.filter((s) => s === 'verified'),
        `round ${round}: ${statuses}`,
      ).toHaveLength(1);
    }
  });

  it('bounds the domains of one owner at 100', async () => {
    const c = await app.signUp('domains-c');
    const iface = await publicInterface(c.token, 'C support');
    for (let i = 0; i < 100; i++) expect((await addDomain(c.token, `d${i}.shop-c.test`, iface.id)).status).toBe(201);
    const over = await addDomain(c.token, 'd100.shop-c.test', iface.id);
    expect(over.status).toBe(409);
    expect(over.body.error.details).toMatch(/at most 100 domains/);
  });

  it('holds the bound of 100 under concurrent creates', async () => {
    const d = await app.signUp('domains-d');
    const iface = await publicInterface(d.token, 'D support');
    // 96 already there (written directly: the sequential path is the test above), then 12 at once for the last 4.
    await app.deps.database.db
      .insertInto('domains')
      .values(
        Array.from({ length: 96 }, (_, i) => ({
          id: randomUUID(),
          owner_id: d.ownerId,
          hostname: `pre${i}.shop-d.test`,
          chat_interface_id: iface.id,
          verification_token: randomUUID().replaceAll('-', ''),
        })),
      )
      .execute();
    const results = await Promise.all(Array.from({ length: 12 }, (_, i) => addDomain(d.token, `race${i}.shop-d.test`, iface.id)));
    expect(results.map((r) => r.status).sort()).toEqual([...Array(4).fill(201), ...Array(8).fill(409)]);
    expect((await app.request('GET', '/api/v1/domains', { token: d.token })).body.data.count).toBe(100);
  });

  it('check-reserved answers for every kind of name', async () => {
    const check = async (domain: string) => (await app.request('GET', `/api/v1/domains/check-reserved?domain=${encodeURIComponent(domain)}`)).body.data;
    expect(await check('free.example-new.test')).toEqual({ domain: 'free.example-new.test', available: true, reason: null });
    expect((await check('chat-service.test')).reason).toBe('reserved');
    expect((await check('co.uk')).reason).toBe('public_suffix');
    expect((await check('10.0.0.1')).reason).toBe('ip_address');
    expect(await check('0x7f.1')).toEqual({ domain: '127.0.0.1', available: false, reason: 'ip_address' });
    expect((await check('localhost')).reason).toBe('localhost');
    expect((await check('bad host')).reason).toBe('invalid');
    expect((await app.request('GET', '/api/v1/domains/check-reserved')).status).toBe(400);
  });

  it('sync re-checks all of an owner’s domains in the background: a TXT record that appeared verifies its domain', async () => {
    const domain = (await addDomain(b.token, 'later.shop-b.test', bInterface.id)).body.data.domain;
    await dns.setTxt('_svc-challenge.later.shop-b.test', txtOf(domain).value);
    const sync = await app.request('POST', '/api/v1/domains/sync', { token: b.token });
    expect(sync.status, sync.text).toBe(202);
    expect(sync.body.data.queued).toBeGreaterThanOrEqual(1);
    expect(sync.body.data.domains.map((d: { hostname: string }) => d.hostname)).toContain('later.shop-b.test');
    const after = await until(
      async () => (await app.request('GET', `/api/v1/domains/${domain.id}`, { token: b.token })).body.data.domain,
      (d) => d.status === 'verified',
    );
    expect(after.lastDns).toMatchObject({ ownership: { status: 'ok' }, routing: { status: 'missing' } });
    expect((await app.request('POST', '/api/v1/domains/sync')).status).toBe(401);
  });

  it('admin maintenance: routing re-checks after the target changes, and fix-domain-redirect deactivates domains that lead nowhere', async () => {
    const iface = await publicInterface(a.token, 'Soon private');
    const domain = (await addDomain(a.token, 'maint.shop-a.test', iface.id)).body.data.domain;
    await dns.setTxt('_svc-challenge.maint.shop-a.test', txtOf(domain).value);
    await app.request('POST', `/api/v1/domains/${domain.id}/verify`, { token: a.token });
    expect((await app.request('POST', `/api/v1/domains/${domain.id}/activate`, { token: a.token })).status).toBe(200);
    await dns.setCname('maint.shop-a.test', 'old-edge.elsewhere.test');

    for (const path of ['update-domains-txt', 'update-domains-cname', 'update-domains-both', 'fix-domain-redirect']) {
      expect((await app.request('POST', `/api/v1/admin/${path}`, { token: a.token })).status, path).toBe(403);
      expect((await app.request('POST', `/api/v1/admin/${path}`)).status, path).toBe(401);
    }
    const cname = await app.request('POST', '/api/v1/admin/update-domains-cname', { token: adminToken });
    expect(cname.status, cname.text).toBe(202);
    expect(cname.body.data).toMatchObject({ scope: 'verified', queued: expect.any(Number) });
    const warned = await until(
      async () => (await app.request('GET', `/api/v1/domains/${domain.id}`, { token: a.token })).body.data.domain,
      (d) => d.lastDns?.routing?.status === 'mismatch',
    );
    expect(warned).toMatchObject({ status: 'active', statusReason: expect.stringMatching(/does not point at this service/) });
    expect((await app.request('POST', '/api/v1/admin/update-domains-txt', { token: adminToken })).body.data.scope).toBe('pending');
    expect((await app.request('POST', '/api/v1/admin/update-domains-both', { token: adminToken })).body.data.scope).toBe('all');

    expect((await app.request('PATCH', `/api/v1/chat-interfaces/${iface.id}`, { token: a.token, body: { public: false } })).status).toBe(200);
    const fix = await app.request('POST', '/api/v1/admin/fix-domain-redirect', { token: adminToken });
    expect(fix.status, fix.text).toBe(200);
    expect(fix.body.data.fixed).toContainEqual({
      id: domain.id,
      hostname: 'maint.shop-a.test',
      ownerId: a.ownerId,
      reason: 'Its chat interface is not public',
    });
    expect((await app.request('GET', `/api/v1/domains/${domain.id}`, { token: a.token })).body.data.domain.status).toBe('inactive');
    expect((await app.request('GET', '/', { headers: { host: 'maint.shop-a.test' } })).status).toBe(404);
    expect((await app.request('POST', '/api/v1/admin/fix-domain-redirect', { token: adminToken })).body.data.fixed).toEqual([]);
  });

  it('isolates owners: another owner’s domain is a 404 everywhere; admins list all', async () => {
    const mine = (await addDomain(a.token, 'private.shop-a.test', aInterface.id)).body.data.domain;
    for (const [method, path] of [
      ['GET', `/api/v1/domains/${mine.id}`],
      ['PATCH', `/api/v1/domains/${mine.id}`],
      ['DELETE', `/api/v1/domains/${mine.id}`],
      ['POST', `/api/v1/domains/${mine.id}/verify`],
      ['GET', `/api/v1/domains/${mine.id}/check-dns`],
      ['GET', `/api/v1/domains/${mine.id}/verification-records`],
      ['POST', `/api/v1/domains/${mine.id}/activate`],
      ['POST', `/api/v1/domains/${mine.id}/deactivate`],
    ] as const) {
      const res = await app.request(method, path, { token: b.token, ...(method === 'PATCH' ? { body: { chatInterfaceId: bInterface.id } } : {}) });
      expect(res.status, `${method} ${path}`).toBe(404);
      expect((await app.request(method, path)).status, `${method} ${path} anonymous`).toBe(401);
    }
    expect((await app.request('GET', '/api/v1/domains', { token: b.token })).body.data.domains.map((d: { hostname: string }) => d.hostname)).not.toContain(
      'private.shop-a.test',
    );
    expect((await app.request('PATCH', `/api/v1/domains/${mine.id}`, { token: a.token, body: { chatInterfaceId: bInterface.id } })).status).toBe(404);
    expect((await app.request('GET', '/api/v1/admin/domains', { token: a.token })).status).toBe(403);
    const all = await app.request('GET', '/api/v1/admin/domains?status=pending_verification&limit=200', { token: adminToken });
    expect(all.status, all.text).toBe(200);
    expect(all.body.data.domains.find((d: { id: string }) => d.id === mine.id)).toMatchObject({ ownerId: a.ownerId, hostname: 'private.shop-a.test' });
    expect((await app.request('DELETE', `/api/v1/domains/${mine.id}`, { token: a.token })).status).toBe(200);
    expect((await app.request('GET', `/api/v1/domains/${mine.id}`, { token: a.token })).status).toBe(404);
  });
  it('with PUBLIC_ORIGINS set, a hostname nobody registered is 421 (misdirected), never another page', async () => {
    const peer = await app.startPeer({ PUBLIC_ORIGINS: 'https://chat-service.test' });
    try {
      const stranger = await peer.request('GET', '/', { headers: { host: 'nobody.example.test' } });
      expect(stranger.status).toBe(421);
      expect(stranger.text).toContain('not served here');
      expect((await peer.request('GET', '/', { headers: { host: 'chat-service.test' } })).status).not.toBe(421);
    } finally {
      await peer.stop();
    }
  });

  it('HSTS covers subdomains only on the service’s own hosts, never on an owner’s domain', async () => {
    const hsts = async (target: TestApp, host: string) =>
      (await target.request('GET', '/api/v1/health/hosting', { headers: { host } })).headers['strict-transport-security'];
    expect(await hsts(app, 'chat.shop-a.test')).toBe('max-age=63072000');
    expect((await app.request('GET', '/', { headers: { host: 'chat.shop-a.test' } })).headers['strict-transport-security']).toBe('max-age=63072000');
    const peer = await app.startPeer({ PUBLIC_ORIGINS: 'https://chat-service.test' });
    try {
      expect(await hsts(peer, 'chat-service.test')).toBe('max-age=63072000; includeSubDomains');
      expect(await hsts(peer, 'Chat-Service.test.:443')).toBe('max-age=63072000; includeSubDomains');
      expect(await hsts(peer, 'chat.shop-a.test')).toBe('max-age=63072000');
      expect(await hsts(peer, 'x.chat-service.test')).toBe('max-age=63072000');
    } finally {
      await peer.stop();
    }
  });
});
