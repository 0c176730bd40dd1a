import { createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createGuardedHttpClient, type GuardedHttpClient } from '../../../adapters/outbound/http/guarded-client.ts';
import {
  type GoogleCalendarServer,
  type HttpEndpointServer,
  type HubSpotServer,
  type ProviderServer,
  startGoogleCalendarServer,
  startHttpEndpoint,
  startHubSpotServer,
  startSlackServer,
} from '../../../test/helpers/provider-servers.ts';
import { type ToolContext, type ToolCredential, type ToolDefinition, ToolError, type Toolkit } from '../toolkit.ts';
import { findToolkit, TOOLKITS } from './catalogue.ts';
import { googleCalendarToolkit } from './google-calendar.ts';
import { httpToolkit } from './http-tool.ts';
import { hubspotToolkit } from './hubspot.ts';
import { slackToolkit } from './slack.ts';

const GOOD_TOKEN = 'good-token-123';

function tool(toolkit: Toolkit, name: string): ToolDefinition {
  const found = toolkit.tools.find((t) => t.name === name);
  if (found === undefined) throw new Error(`${toolkit.slug} has no tool ${name}`);
  return found;
}

function context(http: GuardedHttpClient, apiBaseUrl: string, credential: ToolCredential, settings: Record<string, unknown> = {}): ToolContext {
  return { http, apiBaseUrl, credential, settings, timeoutMs: 5_000 };
}

const oauth = (accessToken: string): ToolCredential => ({ kind: 'oauth2', accessToken });

async function toolError(work: Promise<unknown>): Promise<ToolError> {
  try {
    await work;
  } catch (err) {
    expect(err).toBeInstanceOf(ToolError);
    return err as ToolError;
  }
  throw new Error('expected a ToolError');
}

describe('catalogue', () => {
  it('lists the four toolkits by slug', () => {
    expect(TOOLKITS.map((t) => t.slug)).toEqual(['slack', 'google_calendar', 'hubspot', 'http']);
    expect(findToolkit('slack')).toBe(slackToolkit);
    expect(findToolkit('google_calendar')).toBe(googleCalendarToolkit);
    expect(findToolkit('hubspot')).toBe(hubspotToolkit);
    expect(findToolkit('http')).toBe(httpToolkit);
    expect(findToolkit('nope')).toBeUndefined();
  });

  it('gives every tool an object input schema with required properties and a snake_case name', () => {
    for (const toolkit of TOOLKITS) {
      expect(toolkit.settingsSchema['type']).toBe('object');
      for (const t of toolkit.tools) {
        expect(t.name).toMatch(/^[a-z][a-z0-9_]*$/);
        expect(t.description.length).toBeGreaterThan(0);
        expect(t.inputSchema['type']).toBe('object');
        expect(Array.isArray(t.inputSchema['required'])).toBe(true);
        expect(typeof t.inputSchema['properties']).toBe('object');
        // The HTTP tool's real schema comes from the account's settings.
        if (toolkit.slug !== 'http') expect(t.inputSchema['additionalProperties']).toBe(false);
        for (const name of t.inputSchema['required'] as string[]) expect(Object.keys(t.inputSchema['properties'] as object)).toContain(name);
      }
    }
  });

  it('describes the OAuth apps', () => {
    expect(slackToolkit.auth).toEqual({
      scheme: 'oauth2',
      authorizeUrl: 'https://slack.com/oauth/v2/authorize',
      tokenUrl: 'https://slack.com/api/oauth.v2.access',
      scopes: ['chat:write', 'channels:read'],
      scopeSeparator: ',',
    });
    expect(googleCalendarToolkit.auth).toMatchObject({ scheme: 'oauth2', tokenUrl: 'https://oauth2.googleapis.com/token', scopeSeparator: ' ' });
    expect(hubspotToolkit.auth).toMatchObject({ scheme: 'oauth2', tokenUrl: 'https://api.hubapi.com/oauth/v1/token', scopeSeparator: ' ' });
    expect(httpToolkit.auth).toEqual({ scheme: 'api_key', hint: 'The value sent in the header named in the settings' });
  });

  it('derives status URLs from the API base URL', () => {
    expect(slackToolkit.statusUrl(slackToolkit.apiBaseUrl)).toBe('https://slack.com/api/api.test');
    expect(googleCalendarToolkit.statusUrl(googleCalendarToolkit.apiBaseUrl)).toBe('https://www.googleapis.com/discovery/v1/apis/calendar/v3/rest');
    expect(hubspotToolkit.statusUrl(hubspotToolkit.apiBaseUrl)).toBe('https://api.hubapi.com/');
    expect(httpToolkit.statusUrl(httpToolkit.apiBaseUrl)).toBe('');
  });
});

describe('slack', () => {
  let server: ProviderServer;
  let http: GuardedHttpClient;
  const postMessage = tool(slackToolkit, 'post_message');

  beforeAll(async () => {
    server = await startSlackServer();
    server.validTokens.add(GOOD_TOKEN);
    http = createGuardedHttpClient({ allowHosts: [server.hostPort] });
  });
  afterAll(() => server.close());
  beforeEach(() => {
    server.requests.length = 0;
  });

  it('posts a message in the Web API format', async () => {
    const result = await postMessage.run(
      { channel: '#general', text: 'Hello *team*', thread_ts: '1712345678.000100' },
      context(http, server.url, oauth(GOOD_TOKEN)),
    );
    expect(result).toEqual({ channel: expect.stringMatching(/^C[0-9A-Z]+$/), ts: expect.stringMatching(/^\d+\.\d{6}$/) });
    expect(server.requests).toHaveLength(1);
    const [req] = server.requests;
    expect(req!.method).toBe('POST');
    expect(req!.path).toBe('/api/chat.postMessage');
    expect(req!.headers.authorization).toBe(`Bearer ${GOOD_TOKEN}`);
    expect(req!.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(req!.body).toEqual({ channel: '#general', text: 'Hello *team*', thread_ts: '1712345678.000100' });
  });

  it("names Slack's error code, nothing else of the answer", async () => {
    const err = await toolError(postMessage.run({ channel: '#nope', text: 'hi' }, context(http, server.url, oauth(GOOD_TOKEN))));
    expect(err.message).toBe('Slack refused the message: channel_not_found');
    expect(err.retryable).toBe(false);
  });

  it('reports a refused token', async () => {
    const err = await toolError(postMessage.run({ channel: '#general', text: 'hi' }, context(http, server.url, oauth('revoked'))));
    expect(err.message).toContain('invalid_auth');
    expect(err.message).toContain('access token');
    expect(err.retryable).toBe(false);
  });

  it('makes a 429 retryable and mentions Retry-After', async () => {
    server.respondOnce(429, { ok: false, error: 'ratelimited' }, { 'retry-after': '30' });
    const err = await toolError(postMessage.run({ channel: '#general', text: 'hi' }, context(http, server.url, oauth(GOOD_TOKEN))));
    expect(err.retryable).toBe(true);
    expect(err.message).toContain('Retry-After');
    expect(err.message).toContain('30');
  });

  it('refuses bad input before calling Slack', async () => {
    const ctx = context(http, server.url, oauth(GOOD_TOKEN));
    await toolError(postMessage.run({ channel: '#general', text: 'x'.repeat(4001) }, ctx));
    await toolError(postMessage.run({ channel: '', text: 'hi' }, ctx));
    await toolError(postMessage.run({ channel: '#general', text: 'hi' }, context(http, server.url, { kind: 'none' })));
    expect(server.requests).toHaveLength(0);
  });

  it('checks a credential with auth.test', async () => {
    expect(await slackToolkit.checkCredential(context(http, server.url, oauth(GOOD_TOKEN)))).toEqual({ ok: true, identity: 'Acme/toolbot' });
    expect(server.requests[0]).toMatchObject({ method: 'POST', path: '/api/auth.test', headers: { authorization: `Bearer ${GOOD_TOKEN}` } });
    const refused = await slackToolkit.checkCredential(context(http, server.url, oauth('revoked')));
    expect(refused.ok).toBe(false);
    expect(!refused.ok && refused.reason).toContain('invalid_auth');
  });

  it('has a status URL that answers', async () => {
    const res = await http.request(slackToolkit.statusUrl(server.url));
    expect(res.status).toBe(200);
    expect(res.json()).toEqual({ ok: true });
  });
});

describe('google calendar', () => {
  let server: GoogleCalendarServer;
  let http: GuardedHttpClient;
  const freeBusy = tool(googleCalendarToolkit, 'free_busy');
  const createEvent = tool(googleCalendarToolkit, 'create_event');

  beforeAll(async () => {
    server = await startGoogleCalendarServer();
    server.validTokens.add(GOOD_TOKEN);
    server.busy['primary'] = [{ start: '2025-03-03T09:00:00Z', end: '2025-03-03T10:30:00Z' }];
    server.busy['team@group.calendar.google.com'] = [];
    server.readOnlyCalendars.add('holidays@group.v.calendar.google.com');
    http = createGuardedHttpClient({ allowHosts: [server.hostPort] });
  });
  afterAll(() => server.close());
  beforeEach(() => {
    server.requests.length = 0;
  });

  it('reads busy blocks with freeBusy', async () => {
    const result = await freeBusy.run(
      { timeMin: '2025-03-03T00:00:00Z', timeMax: '2025-03-04T00:00:00Z', timeZone: 'Europe/Paris' },
      context(http, server.url, oauth(GOOD_TOKEN)),
    );
    expect(result).toEqual({ busy: [{ start: '2025-03-03T09:00:00Z', end: '2025-03-03T10:30:00Z' }] });
    const [req] = server.requests;
    expect(req!.method).toBe('POST');
    expect(req!.path).toBe('/calendar/v3/freeBusy');
    expect(req!.headers.authorization).toBe(`Bearer ${GOOD_TOKEN}`);
    expect(req!.headers['content-type']).toBe('application/json');
    expect(req!.body).toEqual({ timeMin: '2025-03-03T00:00:00Z', timeMax: '2025-03-04T00:00:00Z', timeZone: 'Europe/Paris', items: [{ id: 'primary' }] });
  });

  it("turns a calendar's errors into a ToolError", async () => {
    const err = await toolError(
      freeBusy.run(
        { timeMin: '2025-03-03T00:00:00Z', timeMax: '2025-03-04T00:00:00Z', calendarId: 'unknown@example.com' },
        context(http, server.url, oauth(GOOD_TOKEN)),
      ),
    );
    expect(err.message).toContain('notFound');
  });

  it("creates an event in Google's Event format", async () => {
    const result = await createEvent.run(
      {
        summary: 'Planning',
        start: '2025-03-05T14:00:00+01:00',
        end: '2025-03-05T15:00:00+01:00',
        timeZone: 'Europe/Paris',
        description: 'Quarterly planning',
        attendees: ['ada@example.com', 'alan@example.com'],
        calendarId: 'team@group.calendar.google.com',
      },
      context(http, server.url, oauth(GOOD_TOKEN)),
    );
    const created = server.events[0]!.event;
    expect(result).toEqual({ id: created['id'], htmlLink: created['htmlLink'], status: 'confirmed' });
    const [req] = server.requests;
    expect(req!.method).toBe('POST');
    expect(req!.url).toBe('/calendar/v3/calendars/team%40group.calendar.google.com/events?sendUpdates=all');
    expect(req!.headers.authorization).toBe(`Bearer ${GOOD_TOKEN}`);
    expect(req!.headers['content-type']).toBe('application/json');
    expect(req!.body).toEqual({
      summary: 'Planning',
      description: 'Quarterly planning',
      start: { dateTime: '2025-03-05T14:00:00+01:00', timeZone: 'Europe/Paris' },
      end: { dateTime: '2025-03-05T15:00:00+01:00', timeZone: 'Europe/Paris' },
      attendees: [{ email: 'ada@example.com' }, { email: 'alan@example.com' }],
    });
  });

  it('defaults to the primary calendar and leaves out absent fields', async () => {
    await createEvent.run({ summary: 'Call', start: '2025-03-05T14:00:00Z', end: '2025-03-05T14:30:00Z' }, context(http, server.url, oauth(GOOD_TOKEN)));
    expect(server.requests[0]!.url).toBe('/calendar/v3/calendars/primary/events?sendUpdates=all');
    expect(server.requests[0]!.body).toEqual({ summary: 'Call', start: { dateTime: '2025-03-05T14:00:00Z' }, end: { dateTime: '2025-03-05T14:30:00Z' } });
  });

  it("names Google's status, never its message", async () => {
    const err = await toolError(
      createEvent.run(
        { summary: 'x', start: '2025-03-05T14:00:00Z', end: '2025-03-05T15:00:00Z', calendarId: 'holidays@group.v.calendar.google.com' },
        context(http, server.url, oauth(GOOD_TOKEN)),
      ),
    );
    expect(err.message).toBe('Google Calendar refused the request: PERMISSION_DENIED');
    expect(err.retryable).toBe(false);

    const empty = await toolError(
      freeBusy.run({ timeMin: '2025-03-04T00:00:00Z', timeMax: '2025-03-03T00:00:00Z' }, context(http, server.url, oauth(GOOD_TOKEN))),
    );
    expect(empty.message).toBe('Google Calendar refused the request: timeRangeEmpty');
  });

  it('reports a refused token, not retryable', async () => {
    const err = await toolError(
      freeBusy.run({ timeMin: '2025-03-03T00:00:00Z', timeMax: '2025-03-04T00:00:00Z' }, context(http, server.url, oauth('expired'))),
    );
    expect(err.message).toContain("the connection's access token was refused");
    expect(err.message).not.toContain('invalid authentication credentials');
    expect(err.retryable).toBe(false);
  });

  it('makes server errors retryable without their body', async () => {
    server.respondOnce(503, '<html>backend overloaded at 10.0.0.7</html>');
    const err = await toolError(
      freeBusy.run({ timeMin: '2025-03-03T00:00:00Z', timeMax: '2025-03-04T00:00:00Z' }, context(http, server.url, oauth(GOOD_TOKEN))),
    );
    expect(err.retryable).toBe(true);
    expect(err.message).not.toContain('10.0.0.7');
  });

  it('checks a credential with the calendar list', async () => {
    expect(await googleCalendarToolkit.checkCredential(context(http, server.url, oauth(GOOD_TOKEN)))).toEqual({ ok: true, identity: 'owner@example.com' });
    expect(server.requests[0]).toMatchObject({ method: 'GET', url: '/calendar/v3/users/me/calendarList?maxResults=1' });
    const refused = await googleCalendarToolkit.checkCredential(context(http, server.url, oauth('expired')));
    expect(refused.ok).toBe(false);
  });

  it('has a status URL on the same origin that answers', async () => {
    const url = googleCalendarToolkit.statusUrl(server.url);
    expect(url).toBe(`${server.origin}/discovery/v1/apis/calendar/v3/rest`);
    expect((await http.request(url)).status).toBe(200);
  });
});

describe('hubspot', () => {
  let server: HubSpotServer;
  let http: GuardedHttpClient;
  const upsert = tool(hubspotToolkit, 'upsert_contact');

  beforeAll(async () => {
    server = await startHubSpotServer();
    server.validTokens.add(GOOD_TOKEN);
    http = createGuardedHttpClient({ allowHosts: [server.hostPort] });
  });
  afterAll(() => server.close());
  beforeEach(() => {
    server.requests.length = 0;
  });

  it('creates then updates a contact by email', async () => {
    const ctx = context(http, server.url, oauth(GOOD_TOKEN));
    const first = await upsert.run({ email: 'ada@example.com', firstname: 'Ada', company: 'Analytical Engines' }, ctx);
    expect(first).toEqual({ id: expect.any(String), created: true });
    const [req] = server.requests;
    expect(req!.method).toBe('POST');
    expect(req!.path).toBe('/crm/v3/objects/contacts/batch/upsert');
    expect(req!.headers.authorization).toBe(`Bearer ${GOOD_TOKEN}`);
    expect(req!.headers['content-type']).toBe('application/json');
    expect(req!.body).toEqual({
      inputs: [{ idProperty: 'email', id: 'ada@example.com', properties: { email: 'ada@example.com', firstname: 'Ada', company: 'Analytical Engines' } }],
    });

    const second = await upsert.run({ email: 'ada@example.com', lastname: 'Lovelace', phone: '+44 20 0000 0000' }, ctx);
    expect(second).toEqual({ id: (first as { id: string }).id, created: false });
    expect(server.contacts.get('ada@example.com')!.properties).toMatchObject({ firstname: 'Ada', lastname: 'Lovelace', phone: '+44 20 0000 0000' });
  });

  it("names HubSpot's category, never its message", async () => {
    const err = await toolError(upsert.run({ email: 'ada@localhost' }, context(http, server.url, oauth(GOOD_TOKEN))));
    expect(err.message).toBe('HubSpot refused the request: VALIDATION_ERROR');
    expect(err.message).not.toContain('Property values');
  });

  it('reports a refused token', async () => {
    const err = await toolError(upsert.run({ email: 'ada@example.com' }, context(http, server.url, oauth('revoked'))));
    expect(err.message).toContain('INVALID_AUTHENTICATION');
    expect(err.message).not.toContain('credentials not found');
    expect(err.retryable).toBe(false);
  });

  it('makes a 429 retryable', async () => {
    server.respondOnce(429, { status: 'error', message: 'You have reached your secondly limit.', category: 'RATE_LIMITS' }, { 'retry-after': '1' });
    const err = await toolError(upsert.run({ email: 'ada@example.com' }, context(http, server.url, oauth(GOOD_TOKEN))));
    expect(err.retryable).toBe(true);
  });

  it('requires an email', async () => {
    await toolError(upsert.run({ firstname: 'Ada' }, context(http, server.url, oauth(GOOD_TOKEN))));
    expect(server.requests).toHaveLength(0);
  });

  it('checks a credential by listing one contact', async () => {
    expect(await hubspotToolkit.checkCredential(context(http, server.url, oauth(GOOD_TOKEN)))).toEqual({ ok: true });
    expect(server.requests[0]).toMatchObject({ method: 'GET', url: '/crm/v3/objects/contacts?limit=1', headers: { authorization: `Bearer ${GOOD_TOKEN}` } });
    const refused = await hubspotToolkit.checkCredential(context(http, server.url, oauth('revoked')));
    expect(refused.ok).toBe(false);
    expect(!refused.ok && refused.reason).toContain('INVALID_AUTHENTICATION');
  });

  it('has a status URL at the origin', () => {
    expect(hubspotToolkit.statusUrl(server.url)).toBe(`${server.origin}/`);
  });
});

describe('http tool', () => {
  let server: HttpEndpointServer;
  let http: GuardedHttpClient;
  const call = tool(httpToolkit, 'call');
  const settings = (path: string, extra: Record<string, unknown> = {}) => ({
    url: `${server.origin}${path}`,
    inputSchema: { type: 'object', properties: { q: { type: 'string' } } },
    description: 'Searches the catalogue',
    ...extra,
  });

  beforeAll(async () => {
    server = await startHttpEndpoint();
    server.validTokens.add('key-123');
    http = createGuardedHttpClient({ allowHosts: [server.hostPort] });
  });
  afterAll(() => server.close());
  beforeEach(() => {
    server.requests.length = 0;
    server.requireKey = null;
  });

  it('sends GET arguments as query parameters', async () => {
    const result = await call.run(
      { q: 'cats', limit: 5, tags: ['a', 'b'] },
      context(http, '', { kind: 'none' }, settings('/json/search?fixed=1', { method: 'GET' })),
    );
    expect(result).toMatchObject({ received: { method: 'GET', path: '/json/search', search: '?fixed=1&q=cats&limit=5&tags=a&tags=b', body: null } });
    const [req] = server.requests;
    expect(req!.method).toBe('GET');
    expect(req!.headers['content-type']).toBeUndefined();
    expect(req!.headers.authorization).toBeUndefined();
  });

  it('POSTs the arguments as JSON with the key in the configured header', async () => {
    server.requireKey = { header: 'x-api-key', prefix: '' };
    const input = { q: 'cats', nested: { deep: [1, 2] } };
    const result = await call.run(input, context(http, '', { kind: 'api_key', apiKey: 'key-123' }, settings('/json/items', { authHeader: 'X-Api-Key' })));
    expect(result).toEqual({ received: { method: 'POST', path: '/json/items', query: {}, search: '', body: input } });
    const [req] = server.requests;
    expect(req!.headers['content-type']).toBe('application/json');
    expect(req!.headers['x-api-key']).toBe('key-123');
    expect(req!.headers.authorization).toBeUndefined();
  });

  it('uses the prefix, and Authorization: Bearer when no header is named', async () => {
    server.requireKey = { header: 'authorization', prefix: 'Token ' };
    await call.run(
      {},
      context(http, '', { kind: 'api_key', apiKey: 'key-123' }, settings('/json', { method: 'PUT', authHeader: 'Authorization', authPrefix: 'Token ' })),
    );
    expect(server.requests[0]!.method).toBe('PUT');
    expect(server.requests[0]!.headers.authorization).toBe('Token key-123');

    server.requireKey = { header: 'authorization', prefix: 'Bearer ' };
    await call.run({}, context(http, '', { kind: 'api_key', apiKey: 'key-123' }, settings('/json')));
    expect(server.requests[1]!.headers.authorization).toBe('Bearer key-123');
  });

  it("names only the kind of failure when the endpoint cannot be reached, never the owner's address", async () => {
    const closed = await new Promise<number>((resolve) => {
      const probe = createServer();
      probe.listen(0, '127.0.0.1', () => {
        const { port } = probe.address() as AddressInfo;
        probe.close(() => resolve(port));
      });
    });
    const client = createGuardedHttpClient({ allowHosts: [`127.0.0.1:${closed}`] });
    const error = await toolError(call.run({}, context(client, '', { kind: 'none' }, { ...settings('/json'), url: `http://127.0.0.1:${closed}/secret-path` })));
    expect(error.message).toBe('Could not reach the endpoint (connection failed)');
    expect(error.retryable).toBe(true);
  });

  it('turns a failing answer into a ToolError without its body', async () => {
    const err = await toolError(call.run({ q: 'x' }, context(http, '', { kind: 'none' }, settings('/fail'))));
    expect(err.message).toBe('The endpoint answered 500');
    expect(err.retryable).toBe(true);

    server.requireKey = { header: 'x-api-key', prefix: '' };
    const refused = await toolError(call.run({}, context(http, '', { kind: 'api_key', apiKey: 'wrong' }, settings('/json', { authHeader: 'X-Api-Key' }))));
    expect(refused.message).toBe('The endpoint answered 401');
    expect(refused.retryable).toBe(false);
  });

  it('returns a non-JSON answer as text, cut to 4000 characters', async () => {
    expect(await call.run({}, context(http, '', { kind: 'none' }, settings('/hello', { method: 'GET' })))).toEqual({ status: 200, text: 'hello there' });
    const long = (await call.run({}, context(http, '', { kind: 'none' }, settings('/text', { method: 'GET' })))) as { text: string; truncated: boolean };
    expect(long.text).toHaveLength(4000);
    expect(long.truncated).toBe(true);
    expect(await call.run({}, context(http, '', { kind: 'none' }, settings('/empty', { method: 'DELETE' })))).toEqual({ status: 204, text: '' });
  });

  // Stored or shown, such a value recursed past the stack's end.
  it('returns JSON nested deeper than 64 levels as text, not as a value', async () => {
    const deep = (await call.run({}, context(http, '', { kind: 'none' }, settings('/deep', { method: 'GET' })))) as { text: string; truncated: boolean };
    expect(deep.text).toBe('['.repeat(4000));
    expect(deep.truncated).toBe(true);
  });

  it('refuses to run without a usable endpoint', async () => {
    await toolError(call.run({}, context(http, '', { kind: 'none' }, {})));
    await toolError(call.run({}, context(http, '', { kind: 'none' }, { url: 'file:///etc/passwd' })));
    await toolError(call.run({}, context(http, '', { kind: 'none' }, settings('/json', { method: 'TRACE' }))));
    await toolError(call.run({}, context(http, '', { kind: 'none' }, settings('/json', { authHeader: 'Bad Header' }))));
    // An account saved before such names were refused: never called without its key.
    const keyless = await toolError(call.run({}, context(http, '', { kind: 'api_key', apiKey: 'key-123' }, settings('/json', { authHeader: 'Host' }))));
    expect(keyless.message).toMatch(/Host cannot carry the key/);
    expect(server.requests).toHaveLength(0);
  });

  it('refuses, at save time, an auth header the outbound client would drop or set itself', () => {
    for (const name of [
      'Host',
      'host',
      'Content-Length',
      'Transfer-Encoding',
      'Connection',
      'Accept-Encoding',
      'Content-Type',
      'Keep-Alive',
      'Upgrade',
      'TE',
      'Trailer',
      'Expect',
    ]) {
      expect(httpToolkit.settingsProblem?.({ authHeader: name }), name).toMatch(/^settings\.authHeader: .* cannot carry the key/);
    }
    for (const name of ['Authorization', 'X-Api-Key', 'User-Agent', 'Cookie'])
      expect(httpToolkit.settingsProblem?.({ authHeader: name }), name).toBeUndefined();
    expect(httpToolkit.settingsProblem?.({})).toBeUndefined();
  });

  it('checks a credential with a GET to the origin', async () => {
    server.requireKey = { header: 'x-api-key', prefix: '' };
    const good = await httpToolkit.checkCredential(
      context(http, '', { kind: 'api_key', apiKey: 'key-123' }, settings('/json/deep/path', { authHeader: 'X-Api-Key' })),
    );
    expect(good).toEqual({ ok: true, identity: server.hostPort });
    expect(server.requests[0]).toMatchObject({ method: 'GET', path: '/' });
    const bad = await httpToolkit.checkCredential(context(http, '', { kind: 'api_key', apiKey: 'wrong' }, settings('/json', { authHeader: 'X-Api-Key' })));
    expect(bad.ok).toBe(false);
    expect(await httpToolkit.checkCredential(context(http, '', { kind: 'none' }, {}))).toMatchObject({ ok: false });
  });
});

describe('the SSRF guard', () => {
  let slack: ProviderServer;
  let endpoint: HttpEndpointServer;
  const guarded = createGuardedHttpClient({ allowHosts: [] });

  beforeAll(async () => {
    slack = await startSlackServer();
    slack.validTokens.add(GOOD_TOKEN);
    endpoint = await startHttpEndpoint();
  });
  afterAll(async () => {
    await slack.close();
    await endpoint.close();
  });

  it('refuses a private address that is not allow-listed', async () => {
    const err = await toolError(tool(slackToolkit, 'post_message').run({ channel: '#general', text: 'hi' }, context(guarded, slack.url, oauth(GOOD_TOKEN))));
    expect(err.message).toBe('Could not reach Slack (blocked address)');
    expect(err.retryable).toBe(false);

    const viaHttpTool = await toolError(
      tool(httpToolkit, 'call').run(
        {},
        context(guarded, '', { kind: 'none' }, { url: `${endpoint.origin}/json`, inputSchema: { type: 'object' }, description: 'x' }),
      ),
    );
    expect(viaHttpTool.message).toBe('Could not reach the endpoint (blocked address)');

    const check = await httpToolkit.checkCredential(
      context(guarded, '', { kind: 'none' }, { url: `${endpoint.origin}/json`, inputSchema: { type: 'object' }, description: 'x' }),
    );
    expect(check.ok).toBe(false);

    expect(slack.requests).toHaveLength(0);
    expect(endpoint.requests).toHaveLength(0);
  });
});
