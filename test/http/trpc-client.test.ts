import { request as httpsRequest } from 'node:https';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTRPCClient, httpLink, TRPCClientError } from '@trpc/client';
import type { AppRouter } from '../../routers/app-router.ts';
import { insecureAgent, startTestApp, type TestApp } from '../helpers/test-app.ts';

/**
 * A minimal fetch over node:https that accepts the test server's self-signed certificate. Node 20's
 * global fetch takes no agent, and changing the global dispatcher would leak into other test files.
 */
async function insecureFetch(input: RequestInfo | URL | string, init?: RequestInit): Promise<Response> {
  const url = typeof input === 'string' || input instanceof URL ? new URL(input) : new URL(input.url);
  const headers: Record<string, string> = {};
  new Headers(init?.headers as HeadersInit | undefined).forEach((value, name) => {
    headers[name] = value;
  });
  const body = init?.body;
  if (body !== undefined && body !== null && typeof body !== 'string') throw new Error('insecureFetch only sends string bodies');
  return new Promise<Response>((resolve, reject) => {
    const req = httpsRequest(url, { method: init?.method ?? 'GET', headers, agent: insecureAgent }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('error', reject);
      res.on('end', () => {
        const responseHeaders = new Headers();
        for (const [name, value] of Object.entries(res.headers)) {
          if (value === undefined) continue;
          for (const v of Array.isArray(value) ? value : [value]) responseHeaders.append(name, v);
        }
        const status = res.statusCode ?? 0;
        const payload = status === 204 || status === 304 ? null : Buffer.concat(chunks);
        resolve(new Response(payload, { status, statusText: res.statusMessage ?? '', headers: responseHeaders }));
      });
    });
    req.on('error', reject);
    init?.signal?.addEventListener('abort', () => req.destroy(new Error('aborted')), { once: true });
    req.end(body ?? undefined);
  });
}

function makeClient(app: TestApp, token?: string) {
  return createTRPCClient<AppRouter>({
    links: [
      httpLink({
        url: `${app.url}/trpc`,
        fetch: insecureFetch,
        headers: () => (token ? { authorization: `Bearer ${token}` } : {}),
      }),
    ],
  });
}

type Client = ReturnType<typeof makeClient>;

/** Never called: exists only so `tsc --noEmit` proves the client is typed against AppRouter. */
// biome-ignore lint/suspicious/noExportsInTest: exported so neither tsc nor the linter drops it as unused.
export function typeChecksOnly(client: Client) {
  // @ts-expect-error name must be a string
  void client.chatInterfaces.create.mutate({ name: 42 });
  // @ts-expect-error chatInterfaceId is required
  void client.apiKeys.create.mutate({ name: 'k' });
  // @ts-expect-error unknown procedure
  void client.nope.query();
  // @ts-expect-error a mutation has no .query()
  void client.chatInterfaces.create.query({ name: 'x' });
  // The output is typed too: `key` is a string.
  return async () => {
    const created = await client.apiKeys.create.mutate({ name: 'k', chatInterfaceId: 'id' });
    const key: string = created.key;
    // @ts-expect-error count is a number, not a string
    const wrong: string = (await client.apiKeys.list.query()).count;
    return [key, wrong];
  };
}

async function expectClientError(promise: Promise<unknown>) {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(TRPCClientError);
  return error as TRPCClientError<AppRouter>;
}

describe('typed tRPC client over /trpc', () => {
  let app: TestApp;
  let a: { token: string; ownerId: string; email: string };
  let b: { token: string; ownerId: string; email: string };
  let clientA: Client;
  let clientB: Client;

  beforeAll(async () => {
    app = await startTestApp();
    a = await app.signUp('trpc-a');
    b = await app.signUp('trpc-b');
    clientA = makeClient(app, a.token);
    clientB = makeClient(app, b.token);
  });

  afterAll(async () => {
    await app?.stop();
  });

  it('auth.me equals the REST view', async () => {
    const me = await clientA.auth.me.query();
    const rest = await app.request('GET', '/api/v1/auth/me', { token: a.token });
    expect(rest.status).toBe(200);
    expect(me).toEqual(rest.body.data);
    expect(me.owner.id).toBe(a.ownerId);
    expect(me.owner.email).toBe(a.email);
  });

  it('creates an interface and a key, and lists keys like REST does', async () => {
    const { chatInterface } = await clientA.chatInterfaces.create.mutate({ name: 'Typed Client Bot' });
    expect(chatInterface.name).toBe('Typed Client Bot');

    const restInterface = await app.request('GET', `/api/v1/chat-interfaces/${chatInterface.id}`, { token: a.token });
    expect(restInterface.status).toBe(200);
    expect(restInterface.body.data.chatInterface).toEqual(chatInterface);

    const created = await clientA.apiKeys.create.mutate({ name: 'typed key', chatInterfaceId: chatInterface.id });
    expect(created.key).toMatch(/^svc_/);
    expect(created.apiKey.name).toBe('typed key');
    expect(created.apiKey.chatInterfaceId).toBe(chatInterface.id);
    expect(created.key.startsWith(created.apiKey.prefix)).toBe(true);

    const list = await clientA.apiKeys.list.query();
    const restList = await app.request('GET', '/api/v1/api-keys', { token: a.token });
    expect(restList.status).toBe(200);
    expect(list).toEqual(restList.body.data);
    expect(list.apiKeys.map((k) => k.id)).toContain(created.apiKey.id);
    expect(list.count).toBe(list.apiKeys.length);

    const interfaces = await clientA.chatInterfaces.list.query();
    const restInterfaces = await app.request('GET', '/api/v1/chat-interfaces', { token: a.token });
    expect(interfaces).toEqual(restInterfaces.body.data);

    // The created key really authenticates (as an API key, which may not call owner-only procedures).
    const keyClient = makeClient(app, created.key);
    const forbidden = await expectClientError(keyClient.auth.me.query());
    expect(forbidden.data?.appCode).toBe('FORBIDDEN');
    expect(forbidden.data?.httpStatus).toBe(403);
  });

  it("another owner's id -> NOT_FOUND, 404", async () => {
    const { chatInterface } = await clientA.chatInterfaces.create.mutate({ name: 'A private' });

    const getError = await expectClientError(clientB.chatInterfaces.get.query({ id: chatInterface.id }));
    expect(getError.data?.appCode).toBe('NOT_FOUND');
    expect(getError.data?.httpStatus).toBe(404);
    expect(getError.data?.code).toBe('NOT_FOUND');
    expect(getError.message).toBe('Chat interface not found');
    // The HTTP status of the response agrees with the shape.
    expect((getError.meta?.response as Response | undefined)?.status).toBe(404);

    const keyError = await expectClientError(clientB.apiKeys.create.mutate({ name: 'steal', chatInterfaceId: chatInterface.id }));
    expect(keyError.data?.appCode).toBe('NOT_FOUND');
    expect(keyError.data?.httpStatus).toBe(404);

    // Nothing leaked into B's keys.
    expect((await clientB.apiKeys.list.query()).apiKeys).toEqual([]);
  });

  it('validation error (name: "") -> BAD_REQUEST, 400, VALIDATION_FAILED naming the field as REST does', async () => {
    const error = await expectClientError(clientA.chatInterfaces.create.mutate({ name: '' }));
    expect(error.data?.code).toBe('BAD_REQUEST');
    expect(error.data?.httpStatus).toBe(400);
    expect((error.meta?.response as Response | undefined)?.status).toBe(400);
    expect(error.data?.appCode).toBe('VALIDATION_FAILED');
    expect(error.message).toBe('Invalid request parameters');
    expect(error.data?.details).toMatch(/^name: /);
    expect(error.data).not.toHaveProperty('stack');
  });

  it('a body that is not valid UTF-8 is refused (PARSE_ERROR, 400), not stored with replacement characters', async () => {
    const body = Buffer.concat([Buffer.from('{"name":"bad'), Buffer.from([0xff, 0xfe]), Buffer.from('name"}')]);
    const refused = await app.request('POST', '/trpc/chatInterfaces.create', {
      token: a.token,
      rawBody: body,
      headers: { 'content-type': 'application/json' },
    });
    expect(refused.status).toBe(400);
    expect(refused.body.error.data).toMatchObject({ code: 'PARSE_ERROR', httpStatus: 400, appCode: 'MALFORMED_JSON' });
    expect(refused.text).not.toContain('\ufffd');
    const names = (await clientA.chatInterfaces.list.query()).chatInterfaces.map((c) => c.name);
    expect(names.some((name) => name.startsWith('bad'))).toBe(false);
    // Valid UTF-8 beyond ASCII goes through as sent.
    const accepted = await app.request('POST', '/trpc/chatInterfaces.create', { token: a.token, body: { name: 'café ☕ 𝄞' } });
    expect(accepted.status).toBe(200);
    expect(accepted.body.result.data.chatInterface.name).toBe('café ☕ 𝄞');
    // The body cap still holds.
    const huge = await app.request('POST', '/trpc/chatInterfaces.create', { token: a.token, body: { name: 'x'.repeat(2 * 1024 * 1024) } });
    expect(huge.status).toBe(413);
    expect(huge.body.error.data).toMatchObject({ httpStatus: 413, appCode: 'PAYLOAD_TOO_LARGE' });
  });

  it('an unexpected error is INTERNAL_SERVER_ERROR, 500, INTERNAL_ERROR with a fixed message and no internals', async () => {
    const res = await app.request('GET', '/trpc/errorTracking.example');
    expect(res.status).toBe(500);
    expect(res.body.error.message).toBe('Internal server error');
    expect(res.body.error.data).toMatchObject({ code: 'INTERNAL_SERVER_ERROR', httpStatus: 500, appCode: 'INTERNAL_ERROR' });
    expect(res.text).not.toContain('Deliberate');
    expect(res.text).not.toMatch(/\.(ts|js|mjs):\d+/);
  });

  it('no token -> 401', async () => {
    const anonymous = makeClient(app);
    const error = await expectClientError(anonymous.auth.me.query());
    expect(error.data?.httpStatus).toBe(401);
    expect((error.meta?.response as Response | undefined)?.status).toBe(401);
    expect(error.data?.appCode).toBe('UNAUTHORIZED');
    expect(error.data?.code).toBe('UNAUTHORIZED');
  });
});
