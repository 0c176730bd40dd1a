import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { z } from 'zod';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRestHandler } from '../../adapters/inbound/rest/handler.ts';
import { publicProcedure, router } from '../../routers/trpc.ts';
import { loadConfig } from '../../schema/config.ts';
import { createMemoryRateLimiter } from '../../adapters/outbound/rate-limit/memory.ts';
import type { AppDeps, Context } from '../../routers/context.ts';

// The versioning mechanism on a tiny router: a legacy path answers with the older flat shape.
const testRouter = router({
  list: publicProcedure
    .meta({ openapi: { method: 'GET', path: '/api/v1/things' } })
    .input(z.object({ kind: z.string().optional() }))
    .output(z.object({ things: z.array(z.string()), count: z.number() }))
    .query(({ input }) => ({ things: [input.kind ?? 'any'], count: 1 })),
});

let server: Server;
let base: string;
beforeAll(async () => {
  const deps = { config: loadConfig({}), rateLimiter: createMemoryRateLimiter(), errorReporter: { capture() {} } } as unknown as AppDeps;
  const handle = createRestHandler({
    router: testRouter,
    legacyRoutes: [{ method: 'GET', legacyPath: '/api/things/list', v1Path: '/api/v1/things' }],
    jsonBodyLimitBytes: 1024,
    documents: {},
  });
  server = createServer((req, res) => {
    const ctx: Context = {
      deps,
      requestId: 'r',
      clientIp: '127.0.0.1',
      authorization: undefined,
      responseHeaders: {},
      response: {},
      acceptsEventStream: false,
      getCaller: async () => ({ kind: 'anonymous', reason: 'missing' }),
    };
    void handle(req, res, ctx, new URL(req.url!, 'http://x'));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => server.close());

const get = (path: string) =>
  new Promise<{ status: number; body: any }>((resolve, reject) => {
    request(base + path, (res) => {
      let text = '';
      res.on('data', (c) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode!, body: JSON.parse(text) }));
    })
      .on('error', reject)
      .end();
  });

describe('legacy unversioned paths', () => {
  it('v1 answers with the envelope', async () => {
    expect(await get('/api/v1/things?kind=a')).toEqual({ status: 200, body: { success: true, data: { things: ['a'], count: 1 }, version: 'v1' } });
  });
  it('the legacy path is served by the same procedure with the flat shape', async () => {
    expect(await get('/api/things/list?kind=b')).toEqual({ status: 200, body: { success: true, things: ['b'], count: 1 } });
  });
  it('unmapped legacy paths are 404 envelopes', async () => {
    const res = await get('/api/things');
    expect(res.status).toBe(404);
    expect(res.body.success).toBe(false);
  });
});
