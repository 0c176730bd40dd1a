import { request as httpRequest } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HTTP_STATUS } from '../../adapters/inbound/http-status.ts';
import { ERROR_CODES, type ErrorCode } from '../../schema/errors.ts';
import { startTestApp, type TestApp, type TestResponse } from '../helpers/test-app.ts';

interface Owner {
  token: string;
  ownerId: string;
  email: string;
}

interface GraphqlError {
  message: string;
  path?: string[];
  extensions?: { code?: string; details?: string };
}

const ME = /* GraphQL */ `
  query {
    me { id email name plan role tourCompletedAt createdAt }
  }
`;
const INTERFACES = /* GraphQL */ `
  query {
    chatInterfaces { id name slug configId endpointUrl endpointType hasApiKey welcomeMessage placeholder primaryColor avatarUrl public allowedOrigins createdAt updatedAt }
  }
`;
const API_KEYS = /* GraphQL */ `
  query {
    apiKeys { id name chatInterfaceId prefix active lastUsedAt createdAt }
  }
`;
const ONE_INTERFACE = /* GraphQL */ `
  query One($id: ID!) {
    chatInterface(id: $id) { id name slug apiKeys { id name chatInterfaceId prefix active } }
  }
`;

function plainHttp(port: number, method: string, path: string, body?: string): Promise<{ status: number; text: string; body: any }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      { host: '127.0.0.1', port, method, path, headers: body ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } : {} },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', reject);
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let parsed: unknown;
          try {
            parsed = JSON.parse(text);
          } catch {
            parsed = undefined;
          }
          resolve({ status: res.statusCode ?? 0, text, body: parsed });
        });
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

describe('GraphQL (/graphql)', () => {
  let app: TestApp;
  let a: Owner;
  let b: Owner;
  const aInterfaces: { id: string; name: string; slug: string }[] = [];
  const aKeys: { id: string; name: string; prefix: string; chatInterfaceId: string; key: string }[] = [];

  const gql = (query: string, options: { token?: string; variables?: Record<string, unknown> } = {}): Promise<TestResponse> =>
    app.request('POST', '/graphql', { token: options.token, body: { query, variables: options.variables } });

  const errorsOf = (res: TestResponse): GraphqlError[] => (res.body?.errors ?? []) as GraphqlError[];

  beforeAll(async () => {
    app = await startTestApp();
    a = await app.signUp('gql-a');
    b = await app.signUp('gql-b');
    for (const name of ['Support Bot', 'Sales Bot']) {
      const res = await app.request('POST', '/api/v1/chat-interfaces', { token: a.token, body: { name } });
      expect(res.status).toBe(201);
      aInterfaces.push(res.body.data.chatInterface);
    }
    const first = aInterfaces[0]!;
    const second = aInterfaces[1]!;
    for (const [name, chatInterfaceId] of [
      ['support key 1', first.id],
      ['support key 2', first.id],
      ['sales key', second.id],
    ] as const) {
      const res = await app.request('POST', '/api/v1/api-keys', { token: a.token, body: { name, chatInterfaceId } });
      expect(res.status).toBe(201);
      aKeys.push({ ...res.body.data.apiKey, key: res.body.data.key });
    }
    // B owns one interface of its own, so isolation is tested against a non-empty list.
    const bInterface = await app.request('POST', '/api/v1/chat-interfaces', { token: b.token, body: { name: 'B Bot' } });
    expect(bInterface.status).toBe(201);
    const bKey = await app.request('POST', '/api/v1/api-keys', {
      token: b.token,
      body: { name: 'b key', chatInterfaceId: bInterface.body.data.chatInterface.id },
    });
    expect(bKey.status).toBe(201);
  });

  afterAll(async () => {
    await app?.stop();
  });

  describe('same data as REST', () => {
    it('me', async () => {
      const res = await gql(ME, { token: a.token });
      expect(res.status).toBe(200);
      expect(res.body.errors).toBeUndefined();
      const rest = await app.request('GET', '/api/v1/auth/me', { token: a.token });
      expect(rest.status).toBe(200);
      const owner = rest.body.data.owner;
      expect(res.body.data.me).toEqual({
        id: owner.id,
        email: owner.email,
        name: owner.name,
        plan: owner.plan,
        role: owner.role,
        tourCompletedAt: owner.tourCompletedAt,
        createdAt: owner.createdAt,
      });
      expect(res.body.data.me.id).toBe(a.ownerId);
      expect(res.body.data.me.email).toBe(a.email);
    });

    it('chatInterfaces', async () => {
      const res = await gql(INTERFACES, { token: a.token });
      expect(res.status).toBe(200);
      expect(res.body.errors).toBeUndefined();
      const rest = await app.request('GET', '/api/v1/chat-interfaces', { token: a.token });
      expect(rest.status).toBe(200);
      // Every field GraphQL exposes, in the same order as REST.
      expect(res.body.data.chatInterfaces).toEqual(rest.body.data.chatInterfaces);
      expect(res.body.data.chatInterfaces.map((c: { id: string }) => c.id).sort()).toEqual(aInterfaces.map((c) => c.id).sort());
      expect(res.body.data.chatInterfaces.map((c: { slug: string }) => c.slug).sort()).toEqual(aInterfaces.map((c) => c.slug).sort());
    });

    it('apiKeys', async () => {
      const res = await gql(API_KEYS, { token: a.token });
      expect(res.status).toBe(200);
      expect(res.body.errors).toBeUndefined();
      const rest = await app.request('GET', '/api/v1/api-keys', { token: a.token });
      expect(rest.status).toBe(200);
      const restView = rest.body.data.apiKeys.map((k: Record<string, unknown>) => ({
        id: k.id,
        name: k.name,
        chatInterfaceId: k.chatInterfaceId,
        prefix: k.prefix,
        active: k.active,
        lastUsedAt: k.lastUsedAt,
        createdAt: k.createdAt,
      }));
      expect(res.body.data.apiKeys).toEqual(restView);
      expect(res.body.data.apiKeys.map((k: { id: string }) => k.id).sort()).toEqual(aKeys.map((k) => k.id).sort());
      for (const key of res.body.data.apiKeys as { id: string; prefix: string }[]) {
        const created = aKeys.find((k) => k.id === key.id)!;
        expect(key.prefix).toBe(created.prefix);
        expect(created.key.startsWith(key.prefix)).toBe(true);
      }
      // The secret itself is never part of the schema.
      expect(res.text).not.toContain(aKeys[0]!.key);
    });

    it('chatInterface(id) { apiKeys } returns that interface and only its keys', async () => {
      for (const iface of aInterfaces) {
        const res = await gql(ONE_INTERFACE, { token: a.token, variables: { id: iface.id } });
        expect(res.status).toBe(200);
        expect(res.body.errors).toBeUndefined();
        const restOne = await app.request('GET', `/api/v1/chat-interfaces/${iface.id}`, { token: a.token });
        const restKeys = await app.request('GET', '/api/v1/api-keys', { token: a.token });
        const got = res.body.data.chatInterface;
        expect({ id: got.id, name: got.name, slug: got.slug }).toEqual({
          id: restOne.body.data.chatInterface.id,
          name: restOne.body.data.chatInterface.name,
          slug: restOne.body.data.chatInterface.slug,
        });
        const expectedKeys = restKeys.body.data.apiKeys
          .filter((k: { chatInterfaceId: string }) => k.chatInterfaceId === iface.id)
          .map((k: Record<string, unknown>) => ({ id: k.id, name: k.name, chatInterfaceId: k.chatInterfaceId, prefix: k.prefix, active: k.active }));
        expect(got.apiKeys).toEqual(expectedKeys);
        expect(got.apiKeys.length).toBe(aKeys.filter((k) => k.chatInterfaceId === iface.id).length);
      }
    });
  });

  describe('isolation between owners', () => {
    it("B's lists do not include A's interfaces or keys", async () => {
      const interfaces = await gql(INTERFACES, { token: b.token });
      const keys = await gql(API_KEYS, { token: b.token });
      expect(interfaces.body.errors).toBeUndefined();
      expect(keys.body.errors).toBeUndefined();
      const bInterfaceIds = interfaces.body.data.chatInterfaces.map((c: { id: string }) => c.id);
      const bKeyIds = keys.body.data.apiKeys.map((k: { id: string }) => k.id);
      expect(bInterfaceIds).toHaveLength(1);
      expect(bKeyIds).toHaveLength(1);
      for (const iface of aInterfaces) expect(bInterfaceIds).not.toContain(iface.id);
      for (const key of aKeys) expect(bKeyIds).not.toContain(key.id);
    });

    it("chatInterface(id: <A's id>) as B -> NOT_FOUND", async () => {
      const res = await gql(ONE_INTERFACE, { token: b.token, variables: { id: aInterfaces[0]!.id } });
      expect(res.status).toBe(200);
      expect(res.body.data?.chatInterface ?? null).toBeNull();
      const errors = errorsOf(res);
      expect(errors).toHaveLength(1);
      expect(errors[0]!.extensions?.code).toBe('NOT_FOUND');
      expect(errors[0]!.path).toEqual(['chatInterface']);
      expect(res.text).not.toContain(aInterfaces[0]!.name);
    });
  });

  describe('authentication', () => {
    it('no token -> UNAUTHORIZED', async () => {
      const res = await gql(ME);
      expect(res.body.data?.me ?? null).toBeNull();
      expect(errorsOf(res).map((e) => e.extensions?.code)).toEqual(['UNAUTHORIZED']);
    });

    it('a bad token -> UNAUTHORIZED', async () => {
      for (const token of ['not-a-real-session-token-0123456789', 'svc_bogus']) {
        const res = await gql(INTERFACES, { token });
        expect(res.body.data?.chatInterfaces ?? null).toBeNull();
        expect(errorsOf(res).map((e) => e.extensions?.code)).toEqual(['UNAUTHORIZED']);
      }
    });

    it('an API key calling me -> FORBIDDEN', async () => {
      const key = aKeys[0]!.key;
      expect(key).toMatch(/^svc_/);
      const res = await gql(ME, { token: key });
      expect(res.body.data?.me ?? null).toBeNull();
      expect(errorsOf(res).map((e) => e.extensions?.code)).toEqual(['FORBIDDEN']);
    });
  });

  it('responses carry rate-limit headers', async () => {
    const res = await gql(ME, { token: a.token });
    expect(res.status).toBe(200);
    const limit = Number(res.headers['x-ratelimit-limit']);
    const remaining = Number(res.headers['x-ratelimit-remaining']);
    expect(Number.isInteger(limit) && limit > 0).toBe(true);
    expect(Number.isInteger(remaining) && remaining >= 0 && remaining < limit).toBe(true);
    expect(res.headers['x-ratelimit-reset']).toMatch(/^\d+$/);
    // The usual dispatcher headers are there too.
    expect(res.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
    expect(res.headers['strict-transport-security']).toContain('max-age=63072000');
  });

  it("Yoga's and graphql-js's own errors carry a code of the closed list, like every other error", async () => {
    const cases: Array<[() => Promise<TestResponse>, string]> = [
      [() => gql('query { nope }', { token: a.token }), 'VALIDATION_FAILED'],
      [() => gql('query ($id: ID!) { chatInterface(id: $id) { id } }', { token: a.token }), 'BAD_REQUEST'],
      [() => gql('query { me { id ', { token: a.token }), 'BAD_REQUEST'],
      [() => app.request('POST', '/graphql', { token: a.token, rawBody: '{"query": ', headers: { 'content-type': 'application/json' } }), 'BAD_REQUEST'],
      [() => gql(`query { me { id } } # ${'x'.repeat(2 * 1024 * 1024)}`, { token: a.token }), 'PAYLOAD_TOO_LARGE'],
      [() => app.request('PUT', '/graphql', { token: a.token, body: { query: '{ me { id } }' } }), 'METHOD_NOT_ALLOWED'],
    ];
    for (const [send, code] of cases) {
      const res = await send();
      const codes = errorsOf(res).map((e) => e.extensions?.code);
      expect(codes.length, res.text.slice(0, 200)).toBeGreaterThan(0);
      expect(codes, res.text.slice(0, 200)).toContain(code);
      for (const one of codes) expect(ERROR_CODES).toContain(one);
      if (res.status !== 200) expect(res.status, code).toBe(HTTP_STATUS[code as ErrorCode]);
    }
  });

  describe('a syntax error -> GraphQL error response without stack traces', () => {
    const expectSafeParseError = (res: TestResponse) => {
      expect(res.headers['content-type']).toMatch(/json/);
      const errors = errorsOf(res);
      expect(errors).toHaveLength(1);
      expect(errors[0]!.message).toMatch(/^Syntax Error: /);
      // Yoga's GRAPHQL_PARSE_FAILED, named from the closed list as every other error.
      expect(errors[0]!.extensions?.code).toBe('BAD_REQUEST');
      expect(res.body).not.toHaveProperty('data');
      expect(res.text).not.toMatch(/\bat [^"]*\(/);
      expect(res.text).not.toMatch(/\.(ts|js|mjs|cjs):\d+/);
      expect(res.text).not.toContain('node_modules');
      expect(res.text).not.toContain('stack');
    };

    it('Accept: application/graphql-response+json -> 400 (GraphQL over HTTP)', async () => {
      const res = await app.request('POST', '/graphql', {
        token: a.token,
        body: { query: 'query { me { id ' },
        headers: { accept: 'application/graphql-response+json' },
      });
      expect(res.status).toBe(400);
      expectSafeParseError(res);
    });

    it('Accept: application/json (legacy) -> 200 with errors, as Yoga does for that media type', async () => {
      const res = await app.request('POST', '/graphql', { token: a.token, body: { query: 'query { me { id ' }, headers: { accept: 'application/json' } });
      expect(res.status).toBe(200);
      expectSafeParseError(res);
    });
  });

  it('plain HTTP to /graphql is refused with HTTPS_REQUIRED', async () => {
    const res = await plainHttp(app.port, 'POST', '/graphql', JSON.stringify({ query: '{ me { id } }' }));
    expect(res.status).toBe(403);
    expect(res.body).toMatchObject({ success: false, error: { code: 'HTTPS_REQUIRED' } });
    const get = await plainHttp(app.port, 'GET', '/graphql?query=%7B__typename%7D');
    expect(get.status).toBe(403);
    expect(get.body?.error?.code).toBe('HTTPS_REQUIRED');
  });
});
