import { OAuth2Server } from 'oauth2-mock-server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHttpEndpoint, startSlackServer, type HttpEndpointServer, type SlackServer } from '../helpers/provider-servers.ts';
import { startTestApp, type TestApp } from '../helpers/test-app.ts';
import { until } from '../helpers/eventually.ts';
import { startWebhookReceiver, verifyDelivery, type WebhookReceiver } from '../helpers/webhook-receiver.ts';

/**
 * Tool integrations through the real listener: a real OAuth 2 authorization server (oauth2-mock-server) for the
 * code flow with PKCE, state replay and expiry, refresh with rotation, invalid_grant and two concurrent
 * refreshes; a local Slack speaking Slack's format for the credential checks; two owners for isolation.
 */

let oauth: OAuth2Server;
let slack: SlackServer;
let endpoint: HttpEndpointServer;
let receiver: WebhookReceiver;
let app: TestApp;
let a: { token: string; ownerId: string };
let b: { token: string; ownerId: string };
let authConfigId: string;
/** Token-endpoint calls by grant type, as the authorization server saw them. */
const grants: string[] = [];

/** Follows the authorization URL as the owner's browser would, up to the redirect to our callback. */
async function authorize(url: string) {
  const response = await fetch(url, { redirect: 'manual' });
  expect(response.status).toBe(302);
  const back = new URL(response.headers.get('location')!);
  return { path: back.pathname, code: back.searchParams.get('code')!, state: back.searchParams.get('state')! };
}

const callback = (query: Record<string, string>) => app.request('GET', `/api/v1/toolhub/oauth/callback?${new URLSearchParams(query)}`);

async function connectSlack(token = a.token) {
  const res = await app.request('POST', '/api/v1/toolhub/connect', { token, body: { toolkit: 'slack', authConfigId, label: 'Team chat' } });
  expect(res.status, res.text).toBe(201);
  return res.body.data as { account: { id: string; status: string }; authorizationUrl: string; expiresAt: string };
}

async function activeSlackAccount() {
  const started = await connectSlack();
  const back = await authorize(started.authorizationUrl);
  const done = await callback({ code: back.code, state: back.state });
  expect(done.status, done.text).toBe(200);
  expect(done.body.data.account.status).toBe('ACTIVE');
  return started.account.id;
}

const expireToken = (id: string) =>
  app.deps.database.db
    .updateTable('toolhub_accounts')
    .set({ token_expires_at: new Date(Date.now() - 1000) })
    .where('id', '=', id)
    .execute();

beforeAll(async () => {
  oauth = new OAuth2Server();
  await oauth.issuer.keys.generate('RS256');
  await oauth.start(0, '127.0.0.1');
  // Every token the server hands out is one our local Slack accepts.
  oauth.service.on('beforeResponse', (response: { body: Record<string, unknown> }, req: { body: Record<string, string> }) => {
    grants.push(req.body.grant_type ?? '');
    if (typeof response.body.access_token === 'string') slack.validTokens.add(response.body.access_token);
  });
  slack = await startSlackServer();
  endpoint = await startHttpEndpoint();
  receiver = await startWebhookReceiver();
  const issuer = new URL(oauth.issuer.url!);
  app = await startTestApp({
    TOOLHUB_PROVIDER_URLS: [`slack.authorize=${issuer.origin}/authorize`, `slack.token=${issuer.origin}/token`, `slack.api=${slack.url}`].join(','),
    OUTBOUND_ALLOW_HOSTS: [issuer.host, slack.hostPort, endpoint.hostPort, receiver.hostPort].join(','),
    RATE_LIMIT_DEFAULT: '10000',
  });
  a = await app.signUp('tools-a');
  b = await app.signUp('tools-b');
  const created = await app.request('POST', '/api/v1/toolhub/auth-configs', {
    token: a.token,
    body: { toolkit: 'slack', name: 'Our Slack app', clientId: 'client-a', clientSecret: 'secret-a' },
  });
  expect(created.status, created.text).toBe(201);
  authConfigId = created.body.data.authConfig.id;
});
afterAll(async () => {
  await app?.stop();
  await oauth?.stop();
  await slack?.close();
  await endpoint?.close();
  await receiver?.close();
});

describe('catalogue and auth configs', () => {
  it('lists four toolkits with JSON Schemas, and auth configs without secrets', async () => {
    const tools = await app.request('GET', '/api/v1/toolhub/tools', { token: a.token });
    expect(tools.status).toBe(200);
    expect(tools.body.data.toolkits.map((t: { slug: string }) => t.slug)).toEqual(['slack', 'google_calendar', 'hubspot', 'http']);
    const slackKit = tools.body.data.toolkits[0];
    expect(slackKit).toMatchObject({ authScheme: 'oauth2', scopes: ['chat:write', 'channels:read'] });
    expect(slackKit.tools[0]).toMatchObject({
      name: 'slack__post_message',
      inputSchema: { type: 'object', required: expect.arrayContaining(['channel', 'text']) },
    });

    const configs = await app.request('GET', '/api/v1/toolhub/auth-configs', { token: a.token });
    expect(configs.body.data.authConfigs).toEqual([
      expect.objectContaining({ id: authConfigId, toolkit: 'slack', clientId: 'client-a', source: 'owner', scopes: ['chat:write', 'channels:read'] }),
    ]);
    expect(configs.text).not.toContain('secret-a');
    const row = await app.deps.database.db
      .selectFrom('toolhub_auth_configs')
      .select('client_secret_enc')
      .where('id', '=', authConfigId)
      .executeTakeFirstOrThrow();
    expect(row.client_secret_enc).not.toContain('secret-a');
    expect((await app.request('GET', '/api/v1/toolhub/auth-configs', { token: b.token })).body.data.authConfigs).toEqual([]);
    expect((await app.request('PATCH', `/api/v1/toolhub/auth-configs/${authConfigId}`, { token: b.token, body: { name: 'x' } })).status).toBe(404);
    expect((await app.request('DELETE', `/api/v1/toolhub/auth-configs/${authConfigId}`, { token: b.token })).status).toBe(404);
    const bad = await app.request('POST', '/api/v1/toolhub/auth-configs', { token: a.token, body: { toolkit: 'fax', clientId: 'x', clientSecret: 'y' } });
    expect(bad.status).toBe(400);
    expect(bad.body.error.details).toContain('toolkit');
    expect((await app.request('GET', '/api/v1/toolhub/tools')).status).toBe(401);
  });
});

describe('OAuth 2 connection', () => {
  it('authorization code with PKCE S256 and a single-use state makes the account ACTIVE', async () => {
    const started = await connectSlack();
    expect(started.account.status).toBe('INITIATED');
    const url = new URL(started.authorizationUrl);
    expect(url.searchParams.get('code_challenge_method')).toBe('S256');
    expect(url.searchParams.get('code_challenge')).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(url.searchParams.get('scope')).toBe('chat:write,channels:read');
    expect(url.searchParams.get('client_id')).toBe('client-a');
    const back = await authorize(started.authorizationUrl);
    expect(back.path).toBe('/api/v1/toolhub/oauth/callback');
    const done = await callback({ code: back.code, state: back.state });
    expect(done.status, done.text).toBe(200);
    expect(done.body.data.account).toMatchObject({ id: started.account.id, status: 'ACTIVE', statusReason: null });
    expect(grants).toContain('authorization_code');
    // The state is spent: a replay is refused and changes nothing.
    const replay = await callback({ code: back.code, state: back.state });
    expect(replay.status).toBe(400);
    expect(replay.body.error.details).toContain('state');
    const debug = await app.request('GET', '/api/v1/toolhub/debug-accounts', { token: a.token });
    const entry = debug.body.data.accounts.find((x: { id: string }) => x.id === started.account.id);
    expect(entry).toMatchObject({ status: 'ACTIVE', hasAccessToken: true, hasRefreshToken: true, refreshInProgress: false });
    expect(JSON.stringify(debug.body)).not.toMatch(/eyJ/);
  });

  it('a wrong verifier fails the exchange (FAILED with the reason); an expired or made-up state is refused', async () => {
    const started = await connectSlack();
    await app.deps.database.db
      .updateTable('toolhub_oauth_states')
      .set({ code_verifier_enc: app.deps.secrets.seal('w'.repeat(43)) })
      .where('account_id', '=', started.account.id)
      .execute();
    const back = await authorize(started.authorizationUrl);
    const done = await callback({ code: back.code, state: back.state });
    expect(done.status).toBe(200);
    expect(done.body.data.account).toMatchObject({ status: 'FAILED', statusReason: expect.stringMatching(/refused the token request/) });

    const late = await connectSlack();
    await app.deps.database.db
      .updateTable('toolhub_oauth_states')
      .set({ expires_at: new Date(Date.now() - 1000) })
      .where('account_id', '=', late.account.id)
      .execute();
    const lateBack = await authorize(late.authorizationUrl);
    expect((await callback({ code: lateBack.code, state: lateBack.state })).status).toBe(400);
    expect((await callback({ code: 'x', state: 'made-up-state' })).status).toBe(400);
    const denied = await connectSlack();
    const deniedState = new URL(denied.authorizationUrl).searchParams.get('state')!;
    const refused = await callback({ error: 'access_denied', state: deniedState });
    expect(refused.body.data.account).toMatchObject({ status: 'FAILED', statusReason: 'The provider reported access_denied' });
    // The redirect's `error` is anyone's text: only an identifier is kept.
    const scribbled = await connectSlack();
    const scribbledState = new URL(scribbled.authorizationUrl).searchParams.get('state')!;
    const odd = await callback({ error: 'access_denied <script>alert(1)</script>', state: scribbledState });
    expect(odd.body.data.account).toMatchObject({ status: 'FAILED', statusReason: 'The provider reported unknown_error' });
  });

  it('refreshes an expired token once, rotating the refresh token, even for two requests at the same time', async () => {
    const id = await activeSlackAccount();
    const db = app.deps.database.db;
    const before = await db.selectFrom('toolhub_accounts').select('refresh_token_enc').where('id', '=', id).executeTakeFirstOrThrow();
    await expireToken(id);
    const refreshesBefore = grants.filter((g) => g === 'refresh_token').length;
    const [one, two] = await Promise.all([
      app.request('POST', `/api/v1/toolhub/accounts/${id}/activate`, { token: a.token }),
      app.request('POST', `/api/v1/toolhub/accounts/${id}/activate`, { token: a.token }),
    ]);
    expect([one.status, two.status], one.text + two.text).toEqual([200, 200]);
    expect(grants.filter((g) => g === 'refresh_token').length - refreshesBefore).toBe(1);
    const after = await db.selectFrom('toolhub_accounts').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
    expect(after.refresh_token_enc).not.toBe(before.refresh_token_enc);
    expect(after.token_expires_at!.getTime()).toBeGreaterThan(Date.now());
    expect(after.last_refresh_at).not.toBeNull();
    expect(one.body.data.account.identity).toBe('Acme/toolbot');
  });

  it('a workspace name holding NUL and a lone surrogate is stored as storable text; connection and activation succeed', async () => {
    slack.teamName = 'Ac\u0000me \uD800Labs';
    try {
      const id = await activeSlackAccount();
      const res = await app.request('POST', `/api/v1/toolhub/accounts/${id}/activate`, { token: a.token });
      expect(res.status, res.text).toBe(200);
      expect(res.body.data.account).toMatchObject({ id, status: 'ACTIVE', identity: 'Acme \uFFFDLabs/toolbot' });
      const row = await app.deps.database.db.selectFrom('toolhub_accounts').select('identity').where('id', '=', id).executeTakeFirstOrThrow();
      expect(row.identity).toBe('Acme \uFFFDLabs/toolbot');
      expect((await app.request('GET', `/api/v1/toolhub/accounts/${id}`, { token: a.token })).body.data.account.identity).toBe('Acme \uFFFDLabs/toolbot');
    } finally {
      slack.teamName = 'Acme';
    }
  });

  it('invalid_grant on refresh: the account is EXPIRED with the reason, and the owner’s webhook hears of it', async () => {
    await app.setOwner(a.ownerId, { plan: 'enterprise' });
    const hook = await app.request('POST', '/api/v1/enterprise/webhooks', { token: a.token, body: { url: receiver.url, events: ['toolhub_account.expired'] } });
    expect(hook.status, hook.text).toBe(201);
    const id = await activeSlackAccount();
    await expireToken(id);
    oauth.service.once('beforeResponse', (response: { body: unknown; statusCode: number }) => {
      response.body = { error: 'invalid_grant' };
      response.statusCode = 400;
    });
    const res = await app.request('POST', `/api/v1/toolhub/accounts/${id}/activate`, { token: a.token });
    expect(res.status).toBe(409);
    const account = await app.request('GET', `/api/v1/toolhub/accounts/${id}`, { token: a.token });
    expect(account.body.data.account).toMatchObject({ status: 'EXPIRED', statusReason: expect.stringMatching(/invalid_grant/) });
    const [delivery] = await receiver.waitFor(1);
    expect(verifyDelivery(hook.body.data.secret, delivery!)).toMatchObject({
      type: 'toolhub_account.expired',
      data: { id, toolkit: 'slack', status: 'EXPIRED' },
    });
  });

  it('disable is idempotent; activate re-checks the credential; another owner’s account is a 404', async () => {
    const id = await activeSlackAccount();
    const off = await app.request('POST', `/api/v1/toolhub/accounts/${id}/disable`, { token: a.token });
    expect(off.body.data.account.status).toBe('DISABLED');
    expect((await app.request('POST', `/api/v1/toolhub/accounts/${id}/disable`, { token: a.token })).body.data.account.status).toBe('DISABLED');
    // The provider stops accepting the token: activation says why and leaves the account disabled.
    slack.validTokens.clear();
    const refused = await app.request('POST', `/api/v1/toolhub/accounts/${id}/activate`, { token: a.token });
    expect(refused.status).toBe(409);
    expect(refused.body.error.details).toMatch(/invalid_auth/);
    expect((await app.request('GET', `/api/v1/toolhub/accounts/${id}`, { token: a.token })).body.data.account.status).toBe('DISABLED');

    for (const [method, path] of [
      ['GET', `/api/v1/toolhub/accounts/${id}`],
      ['POST', `/api/v1/toolhub/accounts/${id}/activate`],
      ['POST', `/api/v1/toolhub/accounts/${id}/disable`],
    ] as const) {
      expect((await app.request(method, path, { token: b.token })).status, path).toBe(404);
    }
    expect((await app.request('GET', '/api/v1/toolhub/accounts', { token: b.token })).body.data.accounts).toEqual([]);
    const foreign = await app.request('POST', '/api/v1/toolhub/connect', { token: b.token, body: { toolkit: 'slack', authConfigId } });
    expect(foreign.status).toBe(404);
  });
});

describe('retention', () => {
  it("an abandoned connection's state and an expired session are swept; live ones stay", async () => {
    const db = app.deps.database.db;
    const abandoned = await connectSlack();
    const live = await connectSlack();
    await db
      .updateTable('toolhub_oauth_states')
      .set({ expires_at: new Date(Date.now() - 2 * 86_400_000) })
      .where('account_id', '=', abandoned.account.id)
      .execute();
    await db
      .insertInto('sessions')
      .values({ id: 'f'.repeat(64), owner_id: a.ownerId, expires_at: new Date(Date.now() - 1000) })
      .execute();
    const statesOf = async (accountId: string) =>
      (await db.selectFrom('toolhub_oauth_states').select('state_hash').where('account_id', '=', accountId).execute()).length;
    const expiredSessions = async () => (await db.selectFrom('sessions').select('id').where('id', '=', 'f'.repeat(64)).execute()).length;
    expect([await statesOf(abandoned.account.id), await expiredSessions()]).toEqual([1, 1]);
    // The sweep runs when an instance starts, then hourly.
    const peer = await app.startPeer();
    try {
      await until(async () => ((await statesOf(abandoned.account.id)) === 0 && (await expiredSessions()) === 0) || undefined, 'the sweep deletes them');
    } finally {
      await peer.stop();
    }
    expect(await statesOf(live.account.id)).toBe(1);
    expect((await app.request('GET', '/api/v1/toolhub/tools', { token: a.token })).status).toBe(200);
  });
});

describe('API-key accounts, config and status', () => {
  it('the generic HTTP tool is checked before it is stored; a refused key is a 400 naming the reason', async () => {
    endpoint.validTokens.add('key-123');
    const settings = { url: `${endpoint.origin}/hook`, method: 'POST', authHeader: 'X-Api-Key', inputSchema: { type: 'object' }, description: 'Our CRM' };
    const ok = await app.request('POST', '/api/v1/toolhub/connect', { token: a.token, body: { toolkit: 'http', apiKey: 'key-123', settings } });
    expect(ok.status, ok.text).toBe(201);
    expect(ok.body.data).toMatchObject({ authorizationUrl: null, account: { toolkit: 'http', status: 'ACTIVE' } });
    expect(ok.text).not.toContain('key-123');
    const config = await app.request('GET', '/api/v1/toolhub/config', { token: a.token });
    const http = config.body.data.toolkits.find((t: { slug: string }) => t.slug === 'http');
    expect(http).toMatchObject({ authScheme: 'api_key', accounts: { ACTIVE: 1 } });
    const slackEntry = config.body.data.toolkits.find((t: { slug: string }) => t.slug === 'slack');
    expect(slackEntry).toMatchObject({ platformClient: false, authConfigIds: [authConfigId] });
  });

  it('a key or prefix holding characters a header cannot carry is a 400 naming it, never a 500', async () => {
    const settings = { url: `${endpoint.origin}/hook`, inputSchema: { type: 'object' }, description: 'CRM' };
    for (const [apiKey, authPrefix, named] of [
      ['abc\u0001def', undefined, /^apiKey: must hold only characters an HTTP header can carry/],
      ['key-\u20ac', undefined, /^apiKey: must hold only characters an HTTP header can carry/],
      ['abc', '\u20ac ', /auth prefix/],
      ['abc', 'Bearer\u0007 ', /auth prefix/],
    ] as const) {
      const res = await app.request('POST', '/api/v1/toolhub/connect', {
        token: a.token,
        body: { toolkit: 'http', apiKey, settings: { ...settings, ...(authPrefix === undefined ? {} : { authPrefix }) } },
      });
      expect(res.status, res.text).toBe(400);
      expect(res.body.error.details).toMatch(named);
    }
  });

  it('an auth header the request would never carry (Host, framing, hop-by-hop) is refused naming the setting, before any call', async () => {
    const settings = { url: `${endpoint.origin}/hook`, inputSchema: { type: 'object' }, description: 'CRM' };
    const before = (await app.request('GET', '/api/v1/toolhub/accounts', { token: a.token })).body.data;
    for (const authHeader of [
      'Host',
      'Transfer-Encoding',
      'content-length',
      'CONNECTION',
      'Accept-Encoding',
      'Content-Type',
      'Keep-Alive',
      'TE',
      'Upgrade',
      'Expect',
    ]) {
      const res = await app.request('POST', '/api/v1/toolhub/connect', {
        token: a.token,
        body: { toolkit: 'http', apiKey: 'k', settings: { ...settings, authHeader } },
      });
      expect(res.status, authHeader).toBe(400);
      expect(res.body.error.code).toBe('VALIDATION_FAILED');
      expect(res.body.error.details).toMatch(new RegExp(`^settings\\.authHeader: ${authHeader} cannot carry the key`));
    }
    expect((await app.request('GET', '/api/v1/toolhub/accounts', { token: a.token })).body.data).toEqual(before);
    // A header that can carry it does: the endpoint sees the key on the check call.
    endpoint.validTokens.add('custom-header-key');
    endpoint.requireKey = { header: 'X-Api-Key', prefix: '' };
    try {
      const custom = await app.request('POST', '/api/v1/toolhub/connect', {
        token: a.token,
        body: { toolkit: 'http', apiKey: 'custom-header-key', settings: { ...settings, authHeader: 'X-Api-Key' } },
      });
      expect(custom.status, custom.text).toBe(201);
    } finally {
      endpoint.requireKey = null;
    }
  });

  it('settings are checked against the toolkit; an input schema with patterns or references is refused', async () => {
    const settings = { url: `${endpoint.origin}/hook`, inputSchema: { type: 'object' }, description: 'CRM' };
    const connect = (body: Record<string, unknown>) =>
      app.request('POST', '/api/v1/toolhub/connect', { token: a.token, body: { toolkit: 'http', apiKey: 'key-123', ...body } });
    const redos = await connect({ settings: { ...settings, inputSchema: { type: 'object', properties: { q: { type: 'string', pattern: '^(a+)+$' } } } } });
    expect(redos.status).toBe(400);
    expect(redos.body.error.details).toContain('settings.inputSchema.properties.q.pattern');
    // A property named `properties` (or `pattern`) is a name; the schema under it is checked all the same.
    const nested = await connect({
      settings: { ...settings, inputSchema: { type: 'object', properties: { properties: { type: 'string', pattern: '^(a+)+$' } } } },
    });
    expect(nested.status).toBe(400);
    expect(nested.body.error.details).toContain('settings.inputSchema.properties.properties.pattern');
    const deeper = {
      type: 'object',
      properties: { x: { type: 'object', properties: { properties: { type: 'object', properties: { y: { type: 'string', format: 'email' } } } } } },
    };
    expect((await connect({ settings: { ...settings, inputSchema: deeper } })).body.error.details).toContain('properties.properties.properties.y.format');
    const namedLikeKeywords = await connect({
      settings: {
        ...settings,
        inputSchema: { type: 'object', properties: { pattern: { type: 'string' }, format: { type: 'string' }, properties: { type: 'string' } } },
      },
    });
    expect(namedLikeKeywords.status, namedLikeKeywords.text).toBe(201);
    const ref = await connect({ settings: { ...settings, inputSchema: { type: 'object', $ref: '#/x' } } });
    expect(ref.body.error.details).toContain('$ref');
    const extra = await connect({ settings: { ...settings, surprise: true } });
    expect(extra.status).toBe(400);
    expect(extra.body.error.details).toContain('settings');
    const missing = await connect({ settings: { url: settings.url } });
    expect(missing.status).toBe(400);
    // An auth config of one toolkit is not used for another.
    const hub = await app.request('POST', '/api/v1/toolhub/auth-configs', { token: a.token, body: { toolkit: 'hubspot', clientId: 'h', clientSecret: 's' } });
    const crossed = await app.request('POST', '/api/v1/toolhub/connect', {
      token: a.token,
      body: { toolkit: 'slack', authConfigId: hub.body.data.authConfig.id },
    });
    expect(crossed.status).toBe(404);
  });

  it('status asks each provider through the guard', async () => {
    const res = await app.request('GET', '/api/v1/toolhub/status', { token: a.token });
    expect(res.status).toBe(200);
    const bySlug = Object.fromEntries(res.body.data.providers.map((p: { slug: string }) => [p.slug, p]));
    expect(bySlug.slack).toMatchObject({ reachable: true, httpStatus: 200 });
    expect(bySlug.http).toMatchObject({ reachable: null });
  });
});
