import { createServer, request as httpRequest, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/test-app.ts';

let app: TestApp;
let owner: { token: string };
const sentryHits: Array<{ url: string; auth: string; body: string }> = [];
const sentry = createServer((req, res) => {
  let body = '';
  req.on('data', (c) => (body += c));
  req.on('end', () => {
    sentryHits.push({ url: req.url ?? '', auth: String(req.headers['x-sentry-auth']), body });
    res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
  });
});

beforeAll(async () => {
  await new Promise<void>((r) => sentry.listen(0, '127.0.0.1', r));
  const port = (sentry.address() as AddressInfo).port;
  app = await startTestApp({ SENTRY_DSN: `http://publickey123@127.0.0.1:${port}/42`, OUTBOUND_ALLOW_HOSTS: `127.0.0.1:${port}` });
  owner = await app.signUp('platform');
});
afterAll(async () => {
  await app?.stop();
  sentry.close();
});

function plainHttp(path: string, headers: Record<string, string> = {}): Promise<{ status: number; headers: IncomingMessage['headers']; body: any }> {
  return new Promise((resolve, reject) => {
    httpRequest({ host: '127.0.0.1', port: app.port, path, headers }, (res) => {
      let text = '';
      res.on('data', (c) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text ? JSON.parse(text) : undefined }));
    })
      .on('error', reject)
      .end();
  });
}

describe('envelope, routing and body handling', () => {
  it('every response carries X-Request-Id (echoing a sane incoming one) and HSTS', async () => {
    const res = await app.request('GET', '/api/v1/health/hosting');
    expect(res.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
    expect(res.headers['strict-transport-security']).toContain('max-age=');
    const echoed = await app.request('GET', '/api/v1/nowhere', { headers: { 'x-request-id': 'client-supplied-id-123' } });
    expect(echoed.headers['x-request-id']).toBe('client-supplied-id-123');
    const unsafe = await app.request('GET', '/api/v1/health/hosting', { headers: { 'x-request-id': 'bad id\twith spaces' } });
    expect(unsafe.headers['x-request-id']).not.toContain('bad id');
  });

  it('unknown routes are a 404 envelope; a wrong method is 405 with Allow', async () => {
    const res = await app.request('GET', '/api/v1/does-not-exist');
    expect(res.status).toBe(404);
    expect(res.body).toEqual({ success: false, error: { message: 'Route not found', code: 'NOT_FOUND', details: expect.any(String) } });
    const wrong = await app.request('PUT', '/api/v1/api-keys/123', { token: owner.token, body: {} });
    expect(wrong.status).toBe(405);
    expect(wrong.headers.allow).toBe('GET, PATCH, DELETE');
    expect(wrong.body.error.code).toBe('METHOD_NOT_ALLOWED');
    expect((await app.request('GET', '/elsewhere')).status).toBe(404);
  });

  it('malformed JSON is 400, a body over 1 MB is 413, a non-JSON body is 415, JSON with a charset works', async () => {
    const bad = await app.request('POST', '/api/v1/chat-interfaces', {
      token: owner.token,
      rawBody: '{"name": ',
      headers: { 'content-type': 'application/json' },
    });
    expect(bad.status).toBe(400);
    expect(bad.body.error.code).toBe('MALFORMED_JSON');
    const big = await app.request('POST', '/api/v1/chat-interfaces', { token: owner.token, body: { name: 'x', welcomeMessage: 'y'.repeat(1024 * 1024 + 10) } });
    expect(big.status).toBe(413);
    expect(big.body.error.code).toBe('PAYLOAD_TOO_LARGE');
    const form = await app.request('POST', '/api/v1/chat-interfaces', {
      token: owner.token,
      rawBody: 'name=x',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
    expect(form.status).toBe(415);
    const charset = await app.request('POST', '/api/v1/chat-interfaces', {
      token: owner.token,
      rawBody: JSON.stringify({ name: 'Charset ok' }),
      headers: { 'content-type': 'application/json; charset=utf-8' },
    });
    expect(charset.status).toBe(201);
    const array = await app.request('POST', '/api/v1/chat-interfaces', { token: owner.token, body: [1, 2] });
    expect(array.status).toBe(400);
  });

  it('unauthenticated calls to owner routes are 401 before validation is revealed', async () => {
    const res = await app.request('POST', '/api/v1/chat-interfaces', { body: { bogus: true } });
    expect(res.status).toBe(401);
  });
});

describe('HTTPS only', () => {
  it('refuses plain HTTP with a clear envelope, not a redirect', async () => {
    const res = await plainHttp('/api/v1/health/hosting');
    expect(res.status).toBe(403);
    expect(res.headers.location).toBeUndefined();
    expect(res.body).toEqual({ success: false, error: { message: 'HTTPS is required', code: 'HTTPS_REQUIRED', details: expect.any(String) } });
    expect(res.headers['x-request-id']).toBeDefined();
    const spoofed = await plainHttp('/api/v1/health/hosting', { 'x-forwarded-proto': 'https' });
    expect(spoofed.status).toBe(403);
  });

  it('behind a proxy with TRUST_PROXY=1, X-Forwarded-Proto: https is honoured', async () => {
    const proxied = await startTestApp({ TRUST_PROXY: '1' });
    try {
      const viaProxy = await new Promise<number>((resolve, reject) => {
        httpRequest(
          {
            host: '127.0.0.1',
            port: proxied.port,
            path: '/api/v1/health/hosting',
            headers: { 'x-forwarded-proto': 'https', 'x-forwarded-for': '203.0.113.9' },
          },
          (res) => {
            res.resume();
            resolve(res.statusCode ?? 0);
          },
        )
          .on('error', reject)
          .end();
      });
      expect(viaProxy).toBe(200);
      const clear = await new Promise<number>((resolve, reject) => {
        httpRequest({ host: '127.0.0.1', port: proxied.port, path: '/api/v1/health/hosting', headers: { 'x-forwarded-proto': 'http' } }, (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        })
          .on('error', reject)
          .end();
      });
      expect(clear).toBe(403);
    } finally {
      await proxied.stop();
    }
  });
});

describe('health, translations, tour, query cache', () => {
  it('health/hosting reports the database, and 503 when the database is down', async () => {
    const res = await app.request('GET', '/api/v1/health/hosting');
    expect(res.status).toBe(200);
    expect(res.body.data).toMatchObject({ status: 'ok', database: { status: 'up' } });
    const down = await startTestApp();
    try {
      await down.deps.database.close();
      const r = await down.request('GET', '/api/v1/health/hosting');
      expect(r.status).toBe(503);
      expect(r.body.error.code).toBe('SERVICE_UNAVAILABLE');
    } finally {
      await down.stop().catch(() => {});
    }
  });

  it('serves real catalogues for en, es, fr, de with fallback pt-BR -> pt -> en, 404 for unknown', async () => {
    const en = await app.request('GET', '/api/v1/translations/en');
    const es = await app.request('GET', '/api/v1/translations/es');
    const fr = await app.request('GET', '/api/v1/translations/fr');
    const de = await app.request('GET', '/api/v1/translations/de');
    expect(en.body.data.messages['chat.send']).toBe('Send');
    expect(es.body.data.messages['chat.send']).not.toBe('Send');
    expect(fr.body.data.messages['chat.send']).not.toBe('Send');
    expect(de.body.data.messages['chat.send']).not.toBe('Send');
    expect(Object.keys(de.body.data.messages).sort()).toEqual(Object.keys(en.body.data.messages).sort());
    const br = await app.request('GET', '/api/v1/translations/pt-BR');
    expect(br.body.data).toMatchObject({ requested: 'pt-BR', locale: 'pt', fallbackChain: ['pt-BR', 'pt', 'en'] });
    const unknown = await app.request('GET', '/api/v1/translations/ja');
    expect(unknown.status).toBe(404);
    expect((await app.request('GET', '/api/v1/translations/..%2F..%2Fetc')).status).toBe(404);
  });

  it('tour-completed is idempotent and shows on the owner', async () => {
    const first = await app.request('POST', '/api/v1/user/tour-completed', { token: owner.token });
    expect(first.status).toBe(200);
    const second = await app.request('POST', '/api/v1/user/tour-completed', { token: owner.token });
    expect(second.body.data.completedAt).toBe(first.body.data.completedAt);
    expect((await app.request('GET', '/api/v1/auth/me', { token: owner.token })).body.data.owner.tourCompletedAt).toBe(first.body.data.completedAt);
    expect((await app.request('POST', '/api/v1/user/tour-completed')).status).toBe(401);
  });

  it('query cache: save, restore, remove, per owner, with a size cap', async () => {
    const other = await app.signUp('cache-other');
    expect((await app.request('POST', '/api/v1/cache/query-cache/restore', { token: owner.token })).body.data).toEqual({ data: null, updatedAt: null });
    const data = { queries: [{ key: ['chatInterfaces'], state: { data: [1, 2, 3] } }], note: 'ünïcode' };
    const saved = await app.request('POST', '/api/v1/cache/query-cache/save', { token: owner.token, body: { data } });
    expect(saved.status).toBe(200);
    expect(saved.body.data.saved).toBe(true);
    const restored = await app.request('POST', '/api/v1/cache/query-cache/restore', { token: owner.token });
    expect(restored.body.data.data).toEqual(data);
    expect((await app.request('POST', '/api/v1/cache/query-cache/restore', { token: other.token })).body.data.data).toBeNull();
    const tooBig = await app.request('POST', '/api/v1/cache/query-cache/save', { token: owner.token, body: { data: 'x'.repeat(300 * 1024) } });
    expect(tooBig.status).toBe(413);
    expect((await app.request('POST', '/api/v1/cache/query-cache/save', { token: owner.token, body: {} })).status).toBe(400);
    expect((await app.request('POST', '/api/v1/cache/query-cache/remove', { token: owner.token })).body.data).toEqual({ removed: true });
    expect((await app.request('POST', '/api/v1/cache/query-cache/remove', { token: owner.token })).body.data).toEqual({ removed: false });
  });
});

describe('error reporting', () => {
  it('the example endpoint gives a 500 envelope with no stack, logs it, and sends a Sentry envelope', async () => {
    const res = await app.request('GET', '/api/v1/error-tracking-example-api');
    expect(res.status).toBe(500);
    expect(res.body).toEqual({ success: false, error: { message: 'Internal server error', code: 'INTERNAL_ERROR', details: expect.any(String) } });
    expect(res.text).not.toMatch(/Deliberate|\.ts:\d+|at /);
    const requestId = res.headers['x-request-id'];
    const logged = app.logs.map((l) => JSON.parse(l)).find((l) => l.msg === 'unhandled error' && l.requestId === requestId);
    expect(logged).toMatchObject({ level: 'error', errorName: 'DeliberateError' });
    await expect.poll(() => sentryHits.length, { timeout: 5000 }).toBeGreaterThan(0);
    const hit = sentryHits[0]!;
    expect(hit.url).toBe('/api/42/envelope/');
    expect(hit.auth).toContain('sentry_key=publickey123');
    const [header, item, event] = hit.body.split('\n').map((l) => JSON.parse(l));
    expect(header.event_id).toMatch(/^[0-9a-f]{32}$/);
    expect(item.type).toBe('event');
    expect(event.exception.values[0]).toMatchObject({ type: 'DeliberateError' });
    expect(event.tags.requestId).toBe(requestId);
  });
});

describe('OpenAPI and docs', () => {
  it('openapi.json lists every implemented operation with envelopes, auth and error responses', async () => {
    const res = await app.request('GET', '/api/v1/openapi.json');
    expect(res.status).toBe(200);
    const doc = res.body;
    expect(doc.openapi).toMatch(/^3\.1/);
    const operations = Object.entries(doc.paths as Record<string, Record<string, any>>).flatMap(([path, ops]) =>
      Object.keys(ops).map((m) => `${m.toUpperCase()} ${path}`),
    );
    for (const op of [
      'GET /api/v1/api-keys',
      'POST /api/v1/api-keys',
      'GET /api/v1/api-keys/{id}',
      'PATCH /api/v1/api-keys/{id}',
      'DELETE /api/v1/api-keys/{id}',
      'GET /api/v1/chat-interfaces/{id}',
      'PATCH /api/v1/chat-interfaces/{id}',
      'DELETE /api/v1/chat-interfaces/{id}',
      'GET /api/v1/health/hosting',
      'GET /api/v1/translations/{locale}',
      'POST /api/v1/user/tour-completed',
      'POST /api/v1/cache/query-cache/save',
      'POST /api/v1/cache/query-cache/restore',
      'POST /api/v1/cache/query-cache/remove',
      'GET /api/v1/debug/chat-interfaces',
      'GET /api/v1/error-tracking-example-api',
      'POST /api/v1/auth/sign-up',
    ]) {
      expect(operations).toContain(op);
    }
    const create = doc.paths['/api/v1/api-keys'].post;
    expect(create.responses['201'].content['application/json'].schema.properties.data).toBeDefined();
    expect(create.responses['401'].content['application/json'].schema.$ref).toBe('#/components/schemas/ErrorEnvelope');
    expect(create.security).toEqual([{ bearerAuth: [] }]);
    expect(create['x-auth']).toBe('S');
    expect(doc.paths['/api/v1/health/hosting'].get.security).toEqual([]);
    expect(doc.components.schemas.ErrorEnvelope.properties.error.properties.code.enum).toContain('RATE_LIMITED');
  });

  it('docs page renders the reference as HTML', async () => {
    const res = await app.request('GET', '/api/v1/docs');
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toContain('text/html');
    expect(res.text).toContain('/api/v1/chat-interfaces/{id}');
  });
});
