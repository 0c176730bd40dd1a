import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { retainedHeapBytes } from '../helpers/retained-heap.ts';
import { GRAPHQL_LIMITS } from '../../adapters/inbound/graphql/handler.ts';
import { startTestApp, type TestApp, type TestResponse } from '../helpers/test-app.ts';

interface GraphqlError {
  message: string;
  extensions?: { code?: string; details?: string };
}

const DEPTH = 5_000;

/** Over-limit and malformed documents, each with what its refusal must say. */
const hostile: { name: string; query: string; message: RegExp }[] = [
  { name: 'selections nested 5,000 levels deep', query: `{ me ${'{ id '.repeat(DEPTH)}${'}'.repeat(DEPTH)} }`, message: /^Token limit of 1000 exceeded/ },
  {
    name: 'a list argument nested 5,000 levels deep',
    query: `{ chatInterface(id: ${'['.repeat(DEPTH)}${']'.repeat(DEPTH)}) { id } }`,
    message: /^Token limit of 1000 exceeded/,
  },
  {
    name: 'fragments spread into each other 5,000 times',
    query: `{ chatInterfaces { ...F0 } } ${Array.from({ length: DEPTH }, (_, i) => `fragment F${i} on ChatInterface { apiKeys { id } ...F${i + 1} }`).join(' ')}`,
    message: /^Token limit of 1000 exceeded/,
  },
  {
    name: 'thousands of aliases',
    query: `{ ${Array.from({ length: 3_000 }, (_, i) => `a${i}: __typename`).join(' ')} }`,
    message: /^Token limit of 1000 exceeded/,
  },
  { name: 'thousands of directives', query: `{ __typename ${'@include(if: true) '.repeat(2_000)}}`, message: /^Token limit of 1000 exceeded/ },
  // Within the token limit, the shape limits apply.
  { name: 'depth 7 (over 6)', query: '{ chatInterfaces { apiKeys { a { b { c { d { e } } } } } } }', message: /^Query depth limit of 6 exceeded, found 7\./ },
  {
    name: '16 aliases (over 15)',
    query: `{ ${Array.from({ length: 16 }, (_, i) => `a${i}: __typename`).join(' ')} }`,
    message: /^Aliases limit of 15 exceeded, found 16\./,
  },
  { name: '51 directives (over 50)', query: `{ __typename ${'@include(if: true) '.repeat(51)}}`, message: /^Directives limit of 50 exceeded, found 51\./ },
];

function expectClientError(res: TestResponse, message: RegExp) {
  expect(res.status, res.text).toBe(400);
  expect(res.headers['content-type']).toMatch(/json/);
  const errors = (res.body?.errors ?? []) as GraphqlError[];
  expect(errors.length, res.text).toBeGreaterThanOrEqual(1);
  expect(
    errors.some((e) => message.test(e.message)),
    res.text,
  ).toBe(true);
  for (const error of errors) expect(error.extensions?.code).not.toBe('INTERNAL_SERVER_ERROR');
  expect(res.body.data ?? null).toBeNull();
  expectNoInternals(res);
}

function expectNoInternals(res: TestResponse) {
  expect(res.text).not.toMatch(/\bat [^"]*\(/);
  expect(res.text).not.toMatch(/\.(ts|js|mjs|cjs):\d+/);
  expect(res.text).not.toContain('node_modules');
  expect(res.text).not.toContain('stack');
  expect(res.text).not.toContain('RangeError');
}

describe('GraphQL document limits', () => {
  let app: TestApp;
  let owner: { token: string; ownerId: string };
  let enterprise: { token: string; ownerId: string };
  const gql = (query: string, options: { token?: string; accept?: string } = {}) =>
    app.request('POST', '/graphql', { token: options.token, body: { query }, headers: options.accept ? { accept: options.accept } : {} });

  beforeAll(async () => {
    app = await startTestApp();
    owner = await app.signUp('gql-limits');
    enterprise = await app.signUp('gql-limits-ent');
    await app.deps.database.db.updateTable('owners').set({ plan: 'enterprise' }).where('id', '=', enterprise.ownerId).execute();
  });

  afterAll(async () => {
    await app?.stop();
  });

  it('the limits are the documented ones', () => {
    expect(GRAPHQL_LIMITS).toEqual({ maxTokens: 1000, maxDepth: 6, maxAliases: 15, maxDirectives: 50, maxCost: 5000 });
  });

  for (const { name, query, message } of hostile) {
    it(`${name}: 400 with a clear GraphQL error, anonymous or signed in, under every Accept type`, async () => {
      for (const token of [undefined, owner.token]) {
        for (const accept of [undefined, 'application/json', 'application/graphql-response+json']) {
          expectClientError(await gql(query, { token, accept }), message);
        }
      }
    });
  }

  it('the refusal names the limits in details and the code is from the closed list', async () => {
    const res = await gql(hostile[0]!.query);
    const error = res.body.errors[0] as GraphqlError;
    expect(error.extensions).toMatchObject({ code: 'BAD_REQUEST' });
    expect(error.extensions?.details).toContain('1000 tokens');
    expect(error.extensions?.details).toContain('depth 6');
  });

  it('the same deep document over GET is refused the same way', async () => {
    const query = `{ me ${'{ id '.repeat(1_000)}${'}'.repeat(1_000)} }`;
    const res = await app.request('GET', `/graphql?query=${encodeURIComponent(query)}`, { token: owner.token });
    expectClientError(res, /^Token limit of 1000 exceeded/);
  });

  it('braces opened after __typename thousands of times: a syntax error, never a 5xx', async () => {
    const query = `{ __typename ${'{'.repeat(DEPTH)}${'}'.repeat(DEPTH)} }`;
    for (const token of [undefined, owner.token]) {
      const res = await gql(query, { token, accept: 'application/graphql-response+json' });
      expect(res.status, res.text).toBe(400);
      expect(res.body.errors[0].message).toMatch(/^Syntax Error: /);
      expectNoInternals(res);
    }
  });

  it('a query string over the body cap is 413, not a 5xx', async () => {
    const res = await gql(`{ me { id } } # ${'x'.repeat(app.deps.config.JSON_BODY_LIMIT_BYTES)}`, { token: owner.token });
    expect(res.status).toBe(413);
    expectNoInternals(res);
  });

  it('a long comment is no token: a big but shallow document is still served', async () => {
    const res = await gql(`{ me { id } } # ${'x'.repeat(100_000)}`, { token: owner.token });
    expect(res.status, res.text).toBe(200);
    expect(res.body.data.me.id).toBe(owner.ownerId);
  });

  it('documents padded to nearly the body cap are answered, not kept: the parse caches hold no such text', async () => {
    // Yoga's default caches kept each distinct text (1,024 parsed, 1,024 refused, for an hour): about 0.9 MB a request.
    const pad = 'x'.repeat(900_000);
    await gql(`query Warm { __typename }\n#${pad}`);
    const before = retainedHeapBytes();
    for (let i = 0; i < 15; i++) {
      expect((await gql(`query Q${i} { __typename }\n#${pad}`)).status).toBe(200);
      expect((await gql(`query R${i} { ${'a '.repeat(1_100)}}\n#${pad}`)).status).toBe(400);
    }
    // 30 texts of 0.9 MB: 27 MB if kept.
    expect(retainedHeapBytes() - before).toBeLessThan(10 * 1024 * 1024);
  });

  it('legitimate dashboard queries stay within every limit', async () => {
    const queries = [
      '{ me { id email name plan role tourCompletedAt createdAt } chatInterfaces { id name slug configId endpointUrl endpointType hasApiKey welcomeMessage placeholder primaryColor avatarUrl createdAt updatedAt apiKeys { id name chatInterfaceId prefix active lastUsedAt createdAt } } apiKeys { id name chatInterfaceId prefix active lastUsedAt createdAt } }',
      '{ knowledgeBases { id name embeddingModel documentCounts { completed failed processing } documents { fileName status chunkCount } } collections { configId vectorCount dimensions } }',
      '{ webhooks { id url events enabled stats { deliveries succeeded failed pending successRate lastFailureAt lastFailureStatus lastSuccessAt } recentDeliveries(limit: 5) { deliveryId eventType status lastHttpStatus } } }',
      // Fragments do not count as extra depth.
      'query { chatInterfaces { ...Iface } } fragment Iface on ChatInterface { id apiKeys { ...Key } } fragment Key on ApiKey { id prefix }',
      // Fifteen aliases are allowed.
      `{ ${Array.from({ length: 15 }, (_, i) => `k${i}: apiKeys { id }`).join(' ')} }`,
    ];
    for (const query of queries) {
      const res = await gql(query, { token: enterprise.token });
      expect(res.status, res.text).toBe(200);
      expect(res.body.errors, res.text).toBeUndefined();
    }
  });

  it('introspection (as GraphQL tools send it) is not refused by depth or cost', async () => {
    const { getIntrospectionQuery } = await import('graphql');
    const res = await gql(getIntrospectionQuery(), { token: owner.token });
    expect(res.status, res.text).toBe(200);
    expect(res.body.data.__schema.queryType.name).toBe('Query');
  });

  // Introspection is exempt from depth and cost, and its types refer to each other: a chain of fragments through
  // __Type.fields would grow the answer exponentially. graphql-js's MaxIntrospectionDepthRule (a specified rule
  // since 16.9) bounds the nesting of list fields; this keeps it proven for anonymous callers.
  it('a fragment chain through introspection types is refused, anonymously, never answered', async () => {
    const levels = 40;
    const fragments = Array.from(
      { length: levels - 1 },
      (_, i) => `fragment F${i + 1} on __Type { name fields { name type { ...F${i + 2} ofType { ...F${i + 2} } } } }`,
    );
    const query = `{ __schema { types { ...F1 } } } ${fragments.join(' ')} fragment F${levels} on __Type { name }`;
    const res = await gql(query);
    expect(res.status).toBeLessThan(500);
    expect(res.body.data).toBeUndefined();
    expect(res.body.errors[0].message).toMatch(/introspection depth/i);
  });
});
