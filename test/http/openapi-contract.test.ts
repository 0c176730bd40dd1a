import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { appRouter } from '../../routers/app-router.ts';
import { buildRouteTable } from '../../adapters/inbound/rest/routes.ts';
import { assertMatchesContract, type Contract, type ContractResponse } from '../helpers/openapi-contract.ts';
import { openApiContract, startTestApp, type TestApp } from '../helpers/test-app.ts';

let app: TestApp;
let contract: Contract;
let owner: { token: string };

beforeAll(async () => {
  app = await startTestApp();
  contract = await openApiContract(app.url);
  owner = await app.signUp('contract');
});
afterAll(async () => {
  await app?.stop();
});

const json = (status: number, body: unknown): ContractResponse => ({
  status,
  headers: { 'content-type': 'application/json; charset=utf-8' },
  text: JSON.stringify(body),
  body,
});

describe('the response validator', () => {
  it('accepts a real response and reports a deliberately wrong body, naming method, path, status and the schema error', async () => {
    const real = await app.request('GET', '/api/v1/auth/me', { token: owner.token });
    expect(real.status).toBe(200);
    expect(() => assertMatchesContract(contract, 'GET', '/api/v1/auth/me', real)).not.toThrow();

    const wrong = { ...real.body, data: { ...real.body.data, owner: { ...real.body.data.owner, email: 42 } } };
    expect(() => assertMatchesContract(contract, 'GET', '/api/v1/auth/me?x=1', json(200, wrong))).toThrow(
      /GET \/api\/v1\/auth\/me \(operation \/api\/v1\/auth\/me\) answered 200:[\s\S]*\/data\/owner\/email must be string/,
    );
    const envelopeless = { owner: real.body.data.owner };
    expect(() => assertMatchesContract(contract, 'GET', '/api/v1/auth/me', json(200, envelopeless))).toThrow(/must have required property 'success'/);
  });

  it('reports an undocumented status, an undocumented content type and a body that is not JSON', () => {
    const error = { success: false, error: { message: 'x', code: 'CONFLICT', details: '' } };
    expect(() => assertMatchesContract(contract, 'GET', '/api/v1/api-keys', json(409, error))).toThrow(/answered 409:\n {2}- status 409 is not documented/);
    expect(() =>
      assertMatchesContract(contract, 'GET', '/api/v1/api-keys', { status: 401, headers: { 'content-type': 'text/html' }, text: '<p>no</p>', body: undefined }),
    ).toThrow(/content type text\/html is not documented for 401/);
    expect(() =>
      assertMatchesContract(contract, 'GET', '/api/v1/api-keys', { status: 401, headers: { 'content-type': 'application/json' }, text: '{', body: undefined }),
    ).toThrow(/the body is not JSON/);
    expect(() => assertMatchesContract(contract, 'DELETE', '/api/v1/api-keys/abc', json(404, { ...error, error: { ...error.error, code: 'NOPE' } }))).toThrow(
      /\/error\/code must be equal to one of the allowed values/,
    );
  });

  it('matches path templates, most literal first, and skips what is not an operation', () => {
    expect(contract.operationFor('POST', '/api/v1/knowledge-base/documents/bulk-delete')?.template).toBe('/api/v1/knowledge-base/documents/bulk-delete');
    expect(contract.operationFor('DELETE', '/api/v1/knowledge-base/documents/5')?.template).toBe('/api/v1/knowledge-base/documents/{id}');
    expect(contract.operationFor('GET', '/api/v1/enterprise/webhooks/w1/deliveries/')?.template).toBe('/api/v1/enterprise/webhooks/{webhookId}/deliveries');
    const nonsense = { status: 418, headers: { 'content-type': 'text/plain' }, text: 'teapot', body: undefined };
    for (const [method, path] of [
      ['GET', '/api/knowledge-base/documents'],
      ['POST', '/trpc/auth.me'],
      ['POST', '/graphql'],
      ['GET', '/api/v1/no-such-route'],
      ['HEAD', '/api/v1/health/hosting'],
      ['PUT', '/api/v1/api-keys/abc'],
      ['GET', '/api/v1/openapi.json'],
    ] as const) {
      expect(() => assertMatchesContract(contract, method, path, nonsense), `${method} ${path}`).not.toThrow();
    }
  });

  it('checks flat responses as `success` beside the fields, and streams as text/event-stream', () => {
    const test = '/api/v1/enterprise/webhooks/w1/test';
    expect(contract.problemsOf('POST', test, json(200, { success: true, message: 'queued', deliveryId: 'd1' }))).toEqual([]);
    expect(contract.problemsOf('POST', test, json(200, { success: true, data: { message: 'queued', deliveryId: 'd1' }, version: 'v1' })).join('\n')).toMatch(
      /required property 'message'/,
    );
    const stream = { status: 200, headers: { 'content-type': 'text/event-stream; charset=utf-8' }, text: 'data: [DONE]\n\n', body: undefined };
    expect(contract.problemsOf('POST', '/api/v1/knowledge-base/query/stream', stream)).toEqual([]);
    expect(contract.problemsOf('POST', '/api/v1/chat/some-slug', stream)).toEqual([]);
    expect(contract.problemsOf('POST', '/api/v1/knowledge-base/query/stream', json(200, { success: true, data: 'x', version: 'v1' }))[0]).toMatch(
      /application\/json is not documented for 200/,
    );
  });
});

describe('the served document', () => {
  const operationsOf = (doc: any) =>
    Object.entries(doc.paths as Record<string, Record<string, any>>).flatMap(([path, item]) =>
      Object.entries(item).map(([method, operation]) => ({ key: `${method.toUpperCase()} ${path}`, operation })),
    );

  /** The spec's error-tracking example raises on purpose: its output is `never`, so it documents no success. */
  const NEVER_SUCCEEDS = new Set(['GET /api/v1/error-tracking-example-api']);

  it('is OpenAPI 3.1 with exactly the operations of the REST route table, each documenting its success status', () => {
    const doc = contract.document;
    expect(doc.openapi).toMatch(/^3\.1\.\d+$/);
    expect(doc.info.title).toBe('Chat Interface and Knowledge Base Service API');
    expect(doc.info.version).toBe('1.0.0');
    const routes = buildRouteTable(appRouter).routes;
    expect(
      operationsOf(doc)
        .map((o) => o.key)
        .sort(),
    ).toEqual(routes.map((r) => `${r.method} ${r.path}`).sort());
    for (const route of routes) {
      const operation = doc.paths[route.path][route.method.toLowerCase()];
      const where = `${route.method} ${route.path}`;
      if (NEVER_SUCCEEDS.has(where))
        expect(
          Object.keys(operation.responses).filter((status) => status.startsWith('2')),
          where,
        ).toEqual([]);
      else expect(operation.responses[String(route.meta.successStatus ?? 200)], where).toBeDefined();
      for (const [status, response] of Object.entries(operation.responses as Record<string, any>)) {
        expect(status, where).toMatch(/^[1-5]\d\d$/);
        expect(response.description, `${where} ${status}`).toMatch(/\S/);
      }
      if (route.meta.auth !== 'public' && route.meta.auth !== 'billingSignature') expect(operation.responses['401'], where).toBeDefined();
      if (route.method !== 'GET') {
        // A raw body (the billing webhook) is read whatever its Content-Type: never a 415.
        const bodyStatuses = route.meta.rawBody ? ['400', '413'] : ['400', '413', '415'];
        expect(Object.keys(operation.responses), where).toEqual(expect.arrayContaining(bodyStatuses));
        if (route.meta.rawBody) expect(operation.responses['415'], where).toBeUndefined();
      }
      if (route.meta.sse) expect(operation.responses['200'].content['text/event-stream'], where).toBeDefined();
    }
  });

  it('resolves every $ref and compiles every response schema as JSON Schema 2020-12', () => {
    const doc = contract.document;
    const unresolved: string[] = [];
    const walk = (node: unknown) => {
      if (Array.isArray(node)) return node.forEach(walk);
      if (typeof node !== 'object' || node === null) return;
      for (const [key, value] of Object.entries(node)) {
        if (key === '$ref' && typeof value === 'string') {
          const target = value.startsWith('#/')
            ? value
                .slice(2)
                .split('/')
                .map((s) => s.replaceAll('~1', '/').replaceAll('~0', '~'))
                .reduce<any>((at, segment) => at?.[segment], doc)
            : undefined;
          if (target === undefined) unresolved.push(value);
        } else walk(value);
      }
    };
    walk(doc);
    expect(unresolved).toEqual([]);
    expect(contract.compileAll()).toBeGreaterThan(300);
  });

  it('documents both answers of an upload: 201 for a new document, 200 for a duplicate', () => {
    const upload = contract.document.paths['/api/v1/knowledge-base/documents'].post.responses;
    expect(upload['201'].content['application/json'].schema).toEqual(upload['200'].content['application/json'].schema);
  });
});
