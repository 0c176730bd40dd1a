/**
 * Local servers speaking the wire formats of the tool hub's providers, for tests (127.0.0.1, ephemeral port).
 *
 *   const slack = await startSlackServer();
 *   slack.validTokens.add('xoxb-test');
 *   const http = createGuardedHttpClient({ allowHosts: [slack.hostPort] });
 *   await slackToolkit.tools[0].run(input, { http, apiBaseUrl: slack.url, credential: { kind: 'oauth2', accessToken: 'xoxb-test' }, ... });
 *   slack.requests[0].path / .headers / .body;   await slack.close();
 *
 * - Slack (`url` = <origin>/api): chat.postMessage, auth.test, api.test. Answers 200 with `{ok: false, error}` for
 *   every refusal like the real Web API: `not_authed` / `invalid_auth`, `channel_not_found` for `#nope`, `no_text`.
 *   auth.test names the workspace `teamName` ('Acme' unless given to startSlackServer or set on the server).
 * - Google Calendar (`url` = <origin>/calendar/v3): freeBusy, calendars/:id/events, users/me/calendarList, and the
 *   discovery document at /discovery/v1/apis/calendar/v3/rest. Errors are `{error: {code, message, status, errors}}`.
 *   Busy blocks are preset in `busy[calendarId]`; calendars are 'primary' and the keys of `busy`, and
 *   `readOnlyCalendars` answer 403 PERMISSION_DENIED (requiredAccessLevel) to event creation.
 * - HubSpot (`url` = <origin>): crm/v3/objects/contacts (list) and .../batch/upsert (upsert by email: `new: true` the
 *   first time, `new: false` after). Errors are `{status: 'error', message, correlationId, category}`.
 * - A generic endpoint (`startHttpEndpoint`) for the HTTP tool.
 *
 * `respondOnce(status, body, headers)` makes the next request get that answer instead (429s, 500s).
 */
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface RecordedRequest {
  method: string;
  /** Path without the query. */
  path: string;
  /** Decoded query parameters (the last value of a repeated one; `url` has them all). */
  query: Record<string, string>;
  /** Path and query as sent. */
  url: string;
  headers: http.IncomingHttpHeaders;
  /** Parsed JSON, the raw text when not JSON, undefined when empty. */
  body: unknown;
}

export interface CannedResponse {
  status: number;
  body: unknown;
  headers?: Record<string, string>;
}

export interface ProviderServer {
  /** The apiBaseUrl to give the toolkit. */
  url: string;
  /** 127.0.0.1:<port>, for the guarded client's allowHosts. */
  hostPort: string;
  /** http://127.0.0.1:<port> */
  origin: string;
  requests: RecordedRequest[];
  /** Bearer tokens accepted (or, for the HTTP endpoint, keys accepted when `requireKeyHeader` is set). */
  validTokens: Set<string>;
  /** The next request gets this answer (JSON-encoded unless a string) instead of the normal one. */
  respondOnce(status: number, body: unknown, headers?: Record<string, string>): void;
  close(): Promise<void>;
}

type Handler = (req: RecordedRequest, reply: Reply) => void;

interface Reply {
  json(status: number, body: unknown, headers?: Record<string, string>): void;
  text(status: number, body: string, contentType: string, headers?: Record<string, string>): void;
}

async function startServer(basePath: string, handle: Handler, validTokens = new Set<string>()): Promise<ProviderServer> {
  const requests: RecordedRequest[] = [];
  let canned: CannedResponse | null = null;

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const raw = Buffer.concat(chunks).toString('utf8');
      let body: unknown;
      if (raw !== '') {
        try {
          body = JSON.parse(raw);
        } catch {
          body = raw;
        }
      }
      const parsed = new URL(req.url ?? '/', 'http://localhost');
      const recorded: RecordedRequest = {
        method: req.method ?? 'GET',
        path: parsed.pathname,
        query: Object.fromEntries(parsed.searchParams),
        url: req.url ?? '/',
        headers: req.headers,
        body,
      };
      requests.push(recorded);
      const reply: Reply = {
        json(status, payload, headers = {}) {
          res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', ...headers });
          res.end(JSON.stringify(payload));
        },
        text(status, payload, contentType, headers = {}) {
          res.writeHead(status, { 'content-type': contentType, ...headers });
          res.end(payload);
        },
      };
      if (canned !== null) {
        const { status, body: cannedBody, headers } = canned;
        canned = null;
        if (typeof cannedBody === 'string') reply.text(status, cannedBody, 'text/html; charset=utf-8', headers);
        else reply.json(status, cannedBody, headers);
        return;
      }
      handle(recorded, reply);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  const origin = `http://127.0.0.1:${port}`;
  return {
    url: `${origin}${basePath}`,
    hostPort: `127.0.0.1:${port}`,
    origin,
    requests,
    validTokens,
    respondOnce(status, body, headers) {
      canned = { status, body, ...(headers ? { headers } : {}) };
    },
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.closeAllConnections();
        server.close((err) => (err ? reject(err) : resolve()));
      }),
  };
}

function bearer(req: RecordedRequest): string | null {
  const header = req.headers.authorization;
  const match = typeof header === 'string' ? /^Bearer (.+)$/.exec(header) : null;
  return match?.[1] ?? null;
}

function asObject(value: unknown): Record<string, unknown> | null {
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : null;
}

// ---------------------------------------------------------------------------
// Slack Web API

export interface SlackServer extends ProviderServer {
  /** The workspace name auth.test answers as `team`; a test may change it (any text, NUL included). */
  teamName: string;
}

export async function startSlackServer(options: { teamName?: string } = {}): Promise<SlackServer> {
  const validTokens = new Set<string>();
  const state = { teamName: options.teamName ?? 'Acme' };
  let counter = 100;
  const channelId = (name: string) => (name.startsWith('#') ? `C${Buffer.from(name.slice(1)).toString('hex').slice(0, 9).toUpperCase().padEnd(9, '0')}` : name);

  const base = await startServer(
    '/api',
    (req, reply) => {
      if (req.path === '/api/api.test') return reply.json(200, { ok: true });
      const method = req.path.replace(/^\/api\//, '');
      if (!['chat.postMessage', 'auth.test'].includes(method)) return reply.json(404, { ok: false, error: 'unknown_method' });
      if (req.method !== 'POST' && req.method !== 'GET') return reply.json(405, { ok: false, error: 'method_not_supported_for_channel_type' });
      const token = bearer(req);
      if (token === null) return reply.json(200, { ok: false, error: 'not_authed' });
      if (!validTokens.has(token)) return reply.json(200, { ok: false, error: 'invalid_auth' });

      if (method === 'auth.test') {
        return reply.json(200, {
          ok: true,
          url: 'https://acme.slack.com/',
          team: state.teamName,
          user: 'toolbot',
          team_id: 'T0ACME0001',
          user_id: 'U0TOOLBOT1',
          bot_id: 'B0TOOLBOT1',
          is_enterprise_install: false,
        });
      }

      const args = asObject(req.body) ?? {};
      const contentType = String(req.headers['content-type'] ?? '');
      const warning =
        contentType.startsWith('application/json') && !/charset=utf-8/i.test(contentType)
          ? { warning: 'missing_charset', response_metadata: { warnings: ['missing_charset'] } }
          : {};
      if (!contentType.startsWith('application/json')) return reply.json(200, { ok: false, error: 'invalid_arguments' });
      const channel = args['channel'];
      const text = args['text'];
      if (typeof channel !== 'string' || channel === '') return reply.json(200, { ok: false, error: 'channel_not_found', ...warning });
      if (channel === '#nope') return reply.json(200, { ok: false, error: 'channel_not_found', ...warning });
      if (typeof text !== 'string' || text === '') return reply.json(200, { ok: false, error: 'no_text', ...warning });
      if (text.length > 40000) return reply.json(200, { ok: false, error: 'msg_too_long', ...warning });
      const ts = `${Math.floor(Date.now() / 1000)}.${String(++counter).padStart(6, '0')}`;
      const message: Record<string, unknown> = {
        type: 'message',
        subtype: 'bot_message',
        text,
        user: 'U0TOOLBOT1',
        bot_id: 'B0TOOLBOT1',
        app_id: 'A0TOOLHUB1',
        ts,
        team: 'T0ACME0001',
      };
      if (typeof args['thread_ts'] === 'string') message['thread_ts'] = args['thread_ts'];
      return reply.json(200, { ok: true, channel: channelId(channel), ts, message, ...warning });
    },
    validTokens,
  );
  return Object.defineProperty(base, 'teamName', {
    get: () => state.teamName,
    set: (value: string) => {
      state.teamName = value;
    },
    enumerable: true,
  }) as SlackServer;
}

// ---------------------------------------------------------------------------
// Google Calendar API v3

export interface GoogleCalendarServer extends ProviderServer {
  /** Busy blocks per calendar id ('primary' included when set). */
  busy: Record<string, Array<{ start: string; end: string }>>;
  /** Calendars the token can read but not write. */
  readOnlyCalendars: Set<string>;
  /** Events created, per calendar id. */
  events: Array<{ calendarId: string; event: Record<string, unknown> }>;
}

export async function startGoogleCalendarServer(): Promise<GoogleCalendarServer> {
  const validTokens = new Set<string>();
  const busy: Record<string, Array<{ start: string; end: string }>> = {};
  const readOnlyCalendars = new Set<string>();
  const events: Array<{ calendarId: string; event: Record<string, unknown> }> = [];
  const calendarExists = (id: string) => id === 'primary' || id in busy || readOnlyCalendars.has(id);
  const googleError = (code: number, status: string, message: string, reason: string, domain = 'global') => ({
    error: { code, message, errors: [{ message, domain, reason }], status },
  });

  const base = await startServer(
    '/calendar/v3',
    (req, reply) => {
      if (req.path === '/discovery/v1/apis/calendar/v3/rest') {
        return reply.json(200, {
          kind: 'discovery#restDescription',
          id: 'calendar:v3',
          name: 'calendar',
          version: 'v3',
          rootUrl: 'https://www.googleapis.com/',
        });
      }
      const token = bearer(req);
      if (token === null || !validTokens.has(token)) {
        return reply.json(401, googleError(401, 'UNAUTHENTICATED', 'Request had invalid authentication credentials.', 'authError'), {
          'www-authenticate': 'Bearer realm="https://accounts.google.com/", error="invalid_token"',
        });
      }
      if (req.method === 'GET' && req.path === '/calendar/v3/users/me/calendarList') {
        return reply.json(200, {
          kind: 'calendar#calendarList',
          etag: '"p33c9v3kq8v7u60o"',
          nextSyncToken: 'CKCbk8nW2o0DEhBvd25lckBleGFtcGxlLmNvbQ==',
          items: [
            {
              kind: 'calendar#calendarListEntry',
              etag: '"1700000000000000"',
              id: 'owner@example.com',
              summary: 'owner@example.com',
              timeZone: 'Europe/Paris',
              accessRole: 'owner',
              primary: true,
            },
          ].slice(0, Number(req.query['maxResults'] ?? 250)),
        });
      }
      if (req.method === 'POST' && req.path === '/calendar/v3/freeBusy') {
        const args = asObject(req.body);
        const items = args?.['items'];
        if (args === null || typeof args['timeMin'] !== 'string' || typeof args['timeMax'] !== 'string') {
          return reply.json(400, googleError(400, 'INVALID_ARGUMENT', 'Missing timeMin or timeMax.', 'required'));
        }
        if (Date.parse(args['timeMax']) <= Date.parse(args['timeMin'])) {
          return reply.json(400, {
            error: {
              code: 400,
              message: 'The specified time range is empty.',
              errors: [{ domain: 'calendar', reason: 'timeRangeEmpty', message: 'The specified time range is empty.' }],
            },
          });
        }
        const calendars: Record<string, unknown> = {};
        for (const item of Array.isArray(items) ? items : []) {
          const id = asObject(item)?.['id'];
          if (typeof id !== 'string') continue;
          calendars[id] = calendarExists(id) ? { busy: busy[id] ?? [] } : { errors: [{ domain: 'global', reason: 'notFound' }], busy: [] };
        }
        return reply.json(200, { kind: 'calendar#freeBusy', timeMin: args['timeMin'], timeMax: args['timeMax'], calendars });
      }
      const eventsPath = /^\/calendar\/v3\/calendars\/([^/]+)\/events$/.exec(req.path);
      if (req.method === 'POST' && eventsPath !== null) {
        const calendarId = decodeURIComponent(eventsPath[1]!);
        if (!calendarExists(calendarId)) return reply.json(404, googleError(404, 'NOT_FOUND', 'Not Found', 'notFound'));
        if (readOnlyCalendars.has(calendarId)) {
          return reply.json(403, googleError(403, 'PERMISSION_DENIED', 'You need to have writer access to this calendar.', 'requiredAccessLevel', 'calendar'));
        }
        const event = asObject(req.body);
        const start = asObject(event?.['start']);
        const end = asObject(event?.['end']);
        if (event === null || start === null) return reply.json(400, googleError(400, 'INVALID_ARGUMENT', 'Missing start time.', 'required'));
        if (end === null) return reply.json(400, googleError(400, 'INVALID_ARGUMENT', 'Missing end time.', 'required'));
        if (Date.parse(String(end['dateTime'])) <= Date.parse(String(start['dateTime']))) {
          return reply.json(400, {
            error: {
              code: 400,
              message: 'The specified time range is empty.',
              errors: [{ domain: 'calendar', reason: 'timeRangeEmpty', message: 'The specified time range is empty.' }],
            },
          });
        }
        const id = randomUUID().replaceAll('-', '').slice(0, 26);
        const now = new Date().toISOString();
        const attendees = Array.isArray(event['attendees']) ? event['attendees'] : undefined;
        const created = {
          kind: 'calendar#event',
          etag: '"3400000000000000"',
          id,
          status: 'confirmed',
          htmlLink: `https://www.google.com/calendar/event?eid=${Buffer.from(`${id} owner@example.com`).toString('base64url')}`,
          created: now,
          updated: now,
          summary: event['summary'],
          ...(typeof event['description'] === 'string' ? { description: event['description'] } : {}),
          creator: { email: 'owner@example.com', self: true },
          organizer: { email: 'owner@example.com', self: true },
          start,
          end,
          iCalUID: `${id}@google.com`,
          sequence: 0,
          ...(attendees ? { attendees: attendees.map((a) => ({ ...asObject(a), responseStatus: 'needsAction' })) } : {}),
          reminders: { useDefault: true },
          eventType: 'default',
        };
        events.push({ calendarId, event: created });
        return reply.json(200, created);
      }
      return reply.json(404, googleError(404, 'NOT_FOUND', 'Not Found', 'notFound'));
    },
    validTokens,
  );
  return Object.assign(base, { busy, readOnlyCalendars, events });
}

// ---------------------------------------------------------------------------
// HubSpot CRM v3

export interface HubSpotServer extends ProviderServer {
  /** Contacts by email. */
  contacts: Map<string, { id: string; properties: Record<string, string> }>;
}

export async function startHubSpotServer(): Promise<HubSpotServer> {
  const validTokens = new Set<string>();
  const contacts = new Map<string, { id: string; properties: Record<string, string> }>();
  let nextId = 51;
  const hubspotError = (category: string, message: string, extra: Record<string, unknown> = {}) => ({
    status: 'error',
    message,
    correlationId: randomUUID(),
    category,
    ...extra,
  });

  const base = await startServer(
    '',
    (req, reply) => {
      const token = bearer(req);
      if (token === null || !validTokens.has(token)) {
        return reply.json(401, hubspotError('INVALID_AUTHENTICATION', 'Authentication credentials not found. This API supports OAuth 2.0 authentication.'));
      }
      if (req.method === 'GET' && req.path === '/crm/v3/objects/contacts') {
        const limit = Number(req.query['limit'] ?? 10);
        const results = [...contacts.values()].slice(0, limit).map((c) => ({ id: c.id, properties: c.properties, archived: false }));
        return reply.json(200, { results });
      }
      if (req.method === 'POST' && req.path === '/crm/v3/objects/contacts/batch/upsert') {
        const inputs = asObject(req.body)?.['inputs'];
        if (!Array.isArray(inputs) || inputs.length === 0) {
          return reply.json(400, hubspotError('VALIDATION_ERROR', 'Invalid input JSON on line 1, column 1: Some required fields were not set: [inputs]'));
        }
        const startedAt = new Date().toISOString();
        const results: unknown[] = [];
        for (const raw of inputs) {
          const input = asObject(raw);
          const properties = asObject(input?.['properties']) ?? {};
          if (input?.['idProperty'] !== 'email' || typeof input['id'] !== 'string') {
            return reply.json(400, hubspotError('VALIDATION_ERROR', 'Upsert requires idProperty and id.'));
          }
          const email = input['id'].toLowerCase();
          if (!/^[^@\s]+@[^@\s]+\.[^@\s]+$/.test(email)) {
            return reply.json(
              400,
              hubspotError(
                'VALIDATION_ERROR',
                `Property values were not valid: [{"isValid":false,"message":"Email address ${email} is invalid","error":"INVALID_EMAIL","name":"email"}]`,
                {
                  errors: [{ message: `Email address ${email} is invalid`, code: 'INVALID_EMAIL', context: { propertyName: ['email'] } }],
                },
              ),
            );
          }
          const now = new Date().toISOString();
          const existing = contacts.get(email);
          const values = Object.fromEntries(Object.entries(properties).map(([k, v]) => [k, String(v)]));
          const contact = existing ?? { id: String(nextId++), properties: { createdate: now, hs_object_id: '' } };
          contact.properties = { ...contact.properties, ...values, email, lastmodifieddate: now, hs_object_id: contact.id };
          contacts.set(email, contact);
          results.push({
            id: contact.id,
            properties: contact.properties,
            createdAt: contact.properties['createdate'],
            updatedAt: now,
            archived: false,
            new: existing === undefined,
          });
        }
        return reply.json(200, { status: 'COMPLETE', results, startedAt, completedAt: new Date().toISOString() });
      }
      return reply.json(404, hubspotError('OBJECT_NOT_FOUND', 'Resource not found'));
    },
    validTokens,
  );
  return Object.assign(base, { contacts });
}

// ---------------------------------------------------------------------------
// A generic endpoint for the HTTP tool

export interface HttpEndpointServer extends ProviderServer {
  /** When set, requests without `<header>: <prefix><one of validTokens>` get 401. */
  requireKey: { header: string; prefix: string } | null;
}

/**
 * Routes: `/json/*` echoes `{received: {method, path, query, search, body}}` as JSON; `/fail` is a 500 HTML page whose body
 * holds a secret; `/text` is a 200 text/plain of 5000 characters; `/hello` a short text/plain; `/empty` a 204;
 * `/` a 200 text/plain 'ok'.
 */
export async function startHttpEndpoint(): Promise<HttpEndpointServer> {
  const validTokens = new Set<string>();
  const state: { requireKey: HttpEndpointServer['requireKey'] } = { requireKey: null };
  const base = await startServer(
    '',
    (req, reply) => {
      const required = state.requireKey;
      if (required !== null) {
        const value = req.headers[required.header.toLowerCase()];
        const key = typeof value === 'string' && value.startsWith(required.prefix) ? value.slice(required.prefix.length) : null;
        if (key === null || !validTokens.has(key)) return reply.json(401, { error: 'unauthorized', detail: 'secret-internal-detail' });
      }
      if (req.path.startsWith('/json')) {
        return reply.json(200, {
          received: { method: req.method, path: req.path, query: req.query, search: new URL(req.url, 'http://x').search, body: req.body ?? null },
        });
      }
      if (req.path === '/fail')
        return reply.text(500, '<html><body>Internal error: password=hunter2 at db.internal:5432</body></html>', 'text/html; charset=utf-8');
      if (req.path === '/text') return reply.text(200, 'a'.repeat(5000), 'text/plain; charset=utf-8');
      if (req.path === '/hello') return reply.text(200, 'hello there', 'text/plain; charset=utf-8');
      if (req.path === '/deep') return reply.text(200, `${'['.repeat(20_000)}${']'.repeat(20_000)}`, 'application/json');
      if (req.path === '/empty') return reply.text(204, '', 'text/plain');
      if (req.path === '/') return reply.text(200, 'ok', 'text/plain; charset=utf-8');
      return reply.json(404, { error: 'not found' });
    },
    validTokens,
  );
  return Object.defineProperty(base, 'requireKey', {
    get: () => state.requireKey,
    set: (value: HttpEndpointServer['requireKey']) => {
      state.requireKey = value;
    },
    enumerable: true,
  }) as HttpEndpointServer;
}
