import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { SignJWT, exportJWK, exportSPKI, generateKeyPair, type JWK, type JWTPayload } from 'jose';
import { startTestApp, type TestApp } from '../helpers/test-app.ts';

type PrivateKey = Awaited<ReturnType<typeof generateKeyPair>>['privateKey'];
type KeyPair = Awaited<ReturnType<typeof generateKeyPair>>;

/** A minimal OpenID provider: discovery document and JWKS, serving whatever `served` holds. */
let provider: Server;
let issuer: string;
let providerHostPort: string;
let served: JWK[] = [];
const hits = { discovery: 0, jwks: 0 };

let app: TestApp;
let key1: KeyPair;
let key2: KeyPair;
let key3: KeyPair;
let stranger: KeyPair;

async function publicJwk(pair: KeyPair, kid: string): Promise<JWK> {
  return { ...(await exportJWK(pair.publicKey)), kid, alg: 'RS256', use: 'sig' };
}

const now = () => Math.floor(Date.now() / 1000);
let subCounter = 0;
const freshSub = () => `user-${++subCounter}-${Math.random().toString(36).slice(2, 8)}`;

async function idToken(claims: JWTPayload = {}, options: { key?: PrivateKey; kid?: string } = {}): Promise<string> {
  const payload: JWTPayload = {
    iss: issuer,
    aud: 'cis',
    sub: freshSub(),
    iat: now(),
    exp: now() + 300,
    email: `${freshSub()}@idp.example.com`,
    email_verified: true,
    name: 'Ida Provider',
    ...claims,
  };
  return new SignJWT(payload).setProtectedHeader({ alg: 'RS256', kid: options.kid ?? 'k1' }).sign(options.key ?? key1.privateKey);
}

const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');
const me = (token: string) => app.request('GET', '/api/v1/auth/me', { token });

beforeAll(async () => {
  [key1, key2, key3, stranger] = await Promise.all([generateKeyPair('RS256'), generateKeyPair('RS256'), generateKeyPair('RS256'), generateKeyPair('RS256')]);
  served = [await publicJwk(key1, 'k1')];
  provider = createServer((req, res) => {
    const send = (body: unknown) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    if (req.url === '/.well-known/openid-configuration') {
      hits.discovery++;
      send({ issuer, jwks_uri: `${issuer}/jwks` });
    } else if (req.url === '/jwks') {
      hits.jwks++;
      send({ keys: served });
    } else {
      res.writeHead(404).end();
    }
  });
  await new Promise<void>((resolve) => provider.listen(0, '127.0.0.1', resolve));
  const { port } = provider.address() as AddressInfo;
  providerHostPort = `127.0.0.1:${port}`;
  issuer = `http://${providerHostPort}`;
  app = await startTestApp({ OIDC_ISSUER: issuer, OIDC_AUDIENCE: 'cis', OUTBOUND_ALLOW_HOSTS: providerHostPort, ADMIN_EMAILS: 'oidc-boss@idp.example.com' });
});

afterAll(async () => {
  vi.useRealTimers();
  await app?.stop();
  await new Promise<void>((resolve) => (provider ? provider.close(() => resolve()) : resolve()));
});

/** A monotonic test clock: Date only (real timers keep the HTTP stack running), moved forward explicitly. */
function advanceClock(ms: number) {
  if (!vi.isFakeTimers()) vi.useFakeTimers({ toFake: ['Date'] });
  vi.setSystemTime(Date.now() + ms);
}

describe('OIDC ID tokens as owner bearer tokens', () => {
  it('accepts a valid ID token, creating the owner from its verified email (keys discovered once)', async () => {
    const email = 'first.login@idp.example.com';
    const res = await me(await idToken({ email: 'First.Login@IDP.example.com', name: 'First Login' }));
    expect(res.status).toBe(200);
    expect(res.body.data.owner).toMatchObject({ email, name: 'First Login', role: 'owner', plan: 'free' });
    const row = await app.deps.database.db.selectFrom('owners').selectAll().where('email', '=', email).executeTakeFirstOrThrow();
    expect(row.password_hash).toBeNull();
    expect(row.oidc_subject).toMatch(new RegExp(`^${issuer.replace(/[.]/g, '\\.')}#user-`));
    expect(hits).toEqual({ discovery: 1, jwks: 1 });
  });

  it('maps the same subject to the same owner, even after the email claim changes', async () => {
    const sub = freshSub();
    const first = await me(await idToken({ sub, email: 'same.sub@idp.example.com' }));
    const second = await me(await idToken({ sub, email: 'renamed@idp.example.com' }));
    const noEmail = await me(await idToken({ sub, email: undefined, email_verified: undefined }));
    expect([first.status, second.status, noEmail.status]).toEqual([200, 200, 200]);
    expect(second.body.data.owner.id).toBe(first.body.data.owner.id);
    expect(noEmail.body.data.owner.id).toBe(first.body.data.owner.id);
    expect(hits.jwks).toBe(1); // cached
  });

  it('gives the admin role to an email listed in ADMIN_EMAILS', async () => {
    const res = await me(await idToken({ email: 'oidc-boss@idp.example.com' }));
    expect(res.status).toBe(200);
    expect(res.body.data.owner.role).toBe('admin');
  });

  it('links an existing password owner by verified email, dropping the unverified password and its sessions', async () => {
    const { ownerId, email, token } = await app.signUp('linkme');
    const sub = freshSub();
    const res = await me(await idToken({ sub, email }));
    expect(res.status).toBe(200);
    expect(res.body.data.owner.id).toBe(ownerId);
    // Whoever signed up with that email never proved owning it: their password and session stop working.
    const signIn = await app.request('POST', '/api/v1/auth/sign-in', { body: { email, password: 'correct horse battery' } });
    expect(signIn.status).toBe(401);
    expect((await app.request('GET', '/api/v1/auth/me', { token })).status).toBe(401);
    // A second subject claiming the same (already linked) email is refused.
    expect((await me(await idToken({ email }))).status).toBe(401);
  });

  it('linking puts what the unverified creator set up on hold: keys inactive, endpoints disabled, pages private', async () => {
    const squatter = await app.signUp('squatted');
    const bystander = await app.signUp('bystander');
    for (const who of [squatter, bystander]) {
      await app.deps.database.db.updateTable('owners').set({ plan: 'enterprise' }).where('id', '=', who.ownerId).execute();
    }
    const setUp = async (token: string) => {
      const made = await app.request('POST', '/api/v1/chat-interfaces', { token, body: { name: 'Corp bot', public: true } });
      expect(made.status, made.text).toBe(201);
      const iface = made.body.data.chatInterface;
      const key = await app.request('POST', '/api/v1/api-keys', { token, body: { name: 'ops', chatInterfaceId: iface.id } });
      expect(key.status, key.text).toBe(201);
      const hook = await app.request('POST', '/api/v1/enterprise/webhooks', { token, body: { url: `http://${providerHostPort}/hook`, events: ['*'] } });
      expect(hook.status, hook.text).toBe(201);
      return { slug: iface.slug as string, key: key.body.data.key as string, hookId: hook.body.data.webhook.id as string };
    };
    const planted = await setUp(squatter.token);
    const theirs = await setUp(bystander.token);
    const useKey = (key: string) => app.request('GET', '/api/v1/chat-messages/history?sessionId=none', { token: key });
    expect((await useKey(planted.key)).status).toBe(404);

    const owner = await idToken({ sub: freshSub(), email: squatter.email });
    expect((await me(owner)).body.data.owner.id).toBe(squatter.ownerId);
    expect((await useKey(planted.key)).status).toBe(401);
    expect((await app.request('POST', `/api/v1/chat/${planted.slug}/visitor-sessions`, { body: {} })).status).toBe(404);
    const hook = await app.request('GET', `/api/v1/enterprise/webhooks/${planted.hookId}`, { token: owner });
    expect(hook.body.data.webhook).toMatchObject({ enabled: false, disabledReason: 'account_linked' });
    const keys = await app.request('GET', '/api/v1/api-keys', { token: owner });
    expect(keys.body.data.apiKeys.map((k: { active: boolean }) => k.active)).toEqual([false]);

    // Another owner's keys, pages and endpoints are untouched.
    expect((await useKey(theirs.key)).status).toBe(404);
    expect((await app.request('POST', `/api/v1/chat/${theirs.slug}/visitor-sessions`, { body: {} })).status).toBe(201);
    const other = await app.request('GET', `/api/v1/enterprise/webhooks/${theirs.hookId}`, { token: bystander.token });
    expect(other.body.data.webhook).toMatchObject({ enabled: true, disabledReason: null });
  });

  it('refuses a wrong audience, a wrong issuer, an expired token and a token not yet valid', async () => {
    expect((await me(await idToken({ aud: 'someone-else' }))).status).toBe(401);
    expect((await me(await idToken({ iss: 'https://evil.example.com' }))).status).toBe(401);
    expect((await me(await idToken({ iat: now() - 3600, exp: now() - 120 }))).status).toBe(401);
    expect((await me(await idToken({ nbf: now() + 300 }))).status).toBe(401);
    // Within the 30 s clock tolerance.
    expect((await me(await idToken({ exp: now() - 5 }))).status).toBe(200);
    const noExp = await new SignJWT({ iss: issuer, aud: 'cis', sub: freshSub(), email: 'noexp@idp.example.com', email_verified: true })
      .setProtectedHeader({ alg: 'RS256', kid: 'k1' })
      .sign(key1.privateKey);
    expect((await me(noExp)).status).toBe(401);
  });

  it('refuses a token signed by an unknown key, without refetching the JWKS within the cooldown', async () => {
    const before = hits.jwks;
    const res = await me(await idToken({}, { key: stranger.privateKey, kid: 'k-unknown' }));
    expect(res.status).toBe(401);
    expect(res.body.error.code).toBe('UNAUTHORIZED');
    // Same kid as the real key, different key: the signature check fails.
    expect((await me(await idToken({}, { key: stranger.privateKey, kid: 'k1' }))).status).toBe(401);
    // A burst of unknown kids does not hammer the provider.
    for (let i = 0; i < 5; i++) expect((await me(await idToken({}, { key: stranger.privateKey, kid: `k-x${i}` }))).status).toBe(401);
    expect(hits.jwks - before).toBeLessThanOrEqual(1);
  });

  it("refuses alg 'none' and HS256 (including the RSA public key used as an HMAC secret)", async () => {
    const claims = { iss: issuer, aud: 'cis', sub: freshSub(), exp: now() + 300, email: 'none@idp.example.com', email_verified: true };
    expect((await me(`${b64({ alg: 'none', typ: 'JWT' })}.${b64(claims)}.`)).status).toBe(401);
    const hs = await new SignJWT(claims).setProtectedHeader({ alg: 'HS256', kid: 'k1' }).sign(new TextEncoder().encode('a-shared-secret-of-32-bytes-long!'));
    expect((await me(hs)).status).toBe(401);
    const pem = new TextEncoder().encode(await exportSPKI(key1.publicKey));
    const confused = await new SignJWT(claims).setProtectedHeader({ alg: 'HS256', kid: 'k1' }).sign(pem);
    expect((await me(confused)).status).toBe(401);
    expect((await me('not.a.jwt')).status).toBe(401);
  });

  it('follows key rotation: an unknown kid refetches the JWKS, at most once per 30 s', async () => {
    // Leave the cooldown of any earlier fetch behind.
    advanceClock(31_000);
    served = [await publicJwk(key1, 'k1'), await publicJwk(key2, 'k2')];
    const before = hits.jwks;
    const rotated = await me(await idToken({ email: 'rotated@idp.example.com' }, { key: key2.privateKey, kid: 'k2' }));
    expect(rotated.status).toBe(200);
    expect(rotated.body.data.owner.email).toBe('rotated@idp.example.com');
    expect(hits.jwks).toBe(before + 1);
    // The old key still works (it is still served).
    expect((await me(await idToken())).status).toBe(200);

    // Another rotation right away: within the cooldown the new kid is not fetched yet...
    served = [await publicJwk(key2, 'k2'), await publicJwk(key3, 'k3')];
    const tooSoon = await idToken({}, { key: key3.privateKey, kid: 'k3' });
    expect((await me(tooSoon)).status).toBe(401);
    expect(hits.jwks).toBe(before + 1);
    // ...and is once the cooldown has passed.
    advanceClock(31_000);
    expect((await me(await idToken({}, { key: key3.privateKey, kid: 'k3' }))).status).toBe(200);
    expect(hits.jwks).toBe(before + 2);
    // The cached JWKS is replaced wholesale: k1 has been retired.
    expect((await me(await idToken())).status).toBe(401);
    served = [await publicJwk(key1, 'k1'), await publicJwk(key2, 'k2'), await publicJwk(key3, 'k3')];
  });

  it('an OIDC owner creates a chat interface that another owner cannot see', async () => {
    advanceClock(31_000); // k1 is served again; let the unknown-kid refetch happen
    const token = await idToken({ email: 'builder@idp.example.com' });
    const created = await app.request('POST', '/api/v1/chat-interfaces', { token, body: { name: 'OIDC Bot' } });
    expect(created.status).toBe(201);
    const id = created.body.data.chatInterface.id as string;
    expect((await app.request('GET', `/api/v1/chat-interfaces/${id}`, { token })).status).toBe(200);
    const other = await app.signUp('other');
    expect((await app.request('GET', `/api/v1/chat-interfaces/${id}`, { token: other.token })).status).toBe(404);
  });

  // The database refuses NUL and unpaired surrogates: a token carrying them came back a 500.
  it('refuses a subject or email that is not storable text, and cleans such a display name', async () => {
    expect((await me(await idToken({ sub: 'user-\u0000-nul' }))).status).toBe(401);
    expect((await me(await idToken({ sub: 'user-\ud800-half' }))).status).toBe(401);
    expect((await me(await idToken({ email: 'nul\u0000@idp.example.com' }))).status).toBe(401);
    const res = await me(await idToken({ email: 'odd.name@idp.example.com', name: `Na\u0000me${'x'.repeat(94)}\u{1F600}` }));
    expect(res.status, res.text).toBe(200);
    expect(res.body.data.owner.name).toBe(`Name${'x'.repeat(94)}\uFFFD`);
  });

  it('refuses an unknown subject without a verified email', async () => {
    expect((await me(await idToken({ email: 'unverified@idp.example.com', email_verified: false }))).status).toBe(401);
    expect((await me(await idToken({ email: 'stringy@idp.example.com', email_verified: 'true' }))).status).toBe(401);
    expect((await me(await idToken({ email: undefined, email_verified: undefined }))).status).toBe(401);
    const rows = await app.deps.database.db
      .selectFrom('owners')
      .select('id')
      .where('email', 'in', ['unverified@idp.example.com', 'stringy@idp.example.com'])
      .execute();
    expect(rows).toHaveLength(0);
  });

  it('sign-out answers 200 but cannot revoke an ID token (it stays valid until exp)', async () => {
    const token = await idToken({ jti: 'jti-123' });
    expect((await app.request('POST', '/api/v1/auth/sign-out', { token })).status).toBe(200);
    expect((await me(token)).status).toBe(200);
  });

  it('session tokens keep working alongside OIDC', async () => {
    const { token, email } = await app.signUp('plain');
    const res = await me(token);
    expect(res.status).toBe(200);
    expect(res.body.data.owner.email).toBe(email);
  });
});

describe('OIDC provider unreachable or blocked', () => {
  it('answers 401 (never 500) and logs a warning when the JWKS cannot be fetched through the guarded client', async () => {
    // Not allow-listed: the SSRF guard refuses 127.0.0.1, so the provider is never contacted.
    const blocked = await startTestApp({ OIDC_ISSUER: issuer, OIDC_AUDIENCE: 'cis' });
    try {
      const before = { ...hits };
      const res = await blocked.request('GET', '/api/v1/auth/me', { token: await idToken() });
      expect(res.status).toBe(401);
      expect(hits).toEqual(before);
      expect(blocked.logs.some((line) => line.includes('oidc: could not fetch the provider keys') && line.includes('"level":"warn"'))).toBe(true);
    } finally {
      await blocked.stop();
    }
  });

  it('uses OIDC_JWKS_URL when set; a failing JWKS endpoint is a 401', async () => {
    const direct = await startTestApp({
      OIDC_ISSUER: issuer,
      OIDC_AUDIENCE: 'cis',
      OIDC_JWKS_URL: `${issuer}/missing-jwks`,
      OUTBOUND_ALLOW_HOSTS: providerHostPort,
    });
    try {
      const before = { ...hits };
      const res = await direct.request('GET', '/api/v1/auth/me', { token: await idToken() });
      expect(res.status).toBe(401);
      expect(hits.discovery).toBe(before.discovery); // no discovery with an explicit JWKS URL
      expect(direct.logs.some((line) => line.includes('HTTP 404'))).toBe(true);
    } finally {
      await direct.stop();
    }
  });
});
