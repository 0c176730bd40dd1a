import { z } from 'zod';
import { describe, expect, it } from 'vitest';
import { buildRouteTable, type RouteTable } from '../../adapters/inbound/rest/routes.ts';
import { appRouter } from '../../routers/app-router.ts';
import { publicProcedure, router } from '../../routers/trpc.ts';

const byId = z.object({ id: z.string() });
const ok = z.object({ ok: z.boolean() });

// Registration order is deliberately unhelpful: parameterised routes come before the static ones they could swallow.
const testRouter = router({
  getDomain: publicProcedure
    .meta({ openapi: { method: 'GET', path: '/api/v1/domains/{id}' } })
    .input(byId)
    .output(ok)
    .query(() => ({ ok: true })),
  deleteDomain: publicProcedure
    .meta({ openapi: { method: 'DELETE', path: '/api/v1/domains/{id}' } })
    .input(byId)
    .output(ok)
    .mutation(() => ({ ok: true })),
  checkReserved: publicProcedure
    .meta({ openapi: { method: 'GET', path: '/api/v1/domains/check-reserved' } })
    .input(z.object({ name: z.string().optional() }))
    .output(ok)
    .query(() => ({ ok: true })),
  listDomains: publicProcedure
    .meta({ openapi: { method: 'GET', path: '/api/v1/domains' } })
    .input(z.object({}))
    .output(ok)
    .query(() => ({ ok: true })),
  createDomain: publicProcedure
    .meta({ openapi: { method: 'POST', path: '/api/v1/domains' } })
    .input(z.object({ name: z.string() }))
    .output(ok)
    .mutation(() => ({ ok: true })),
  getRecord: publicProcedure
    .meta({ openapi: { method: 'GET', path: '/api/v1/domains/{id}/records/{recordId}' } })
    .input(z.object({ id: z.string(), recordId: z.string() }))
    .output(ok)
    .query(() => ({ ok: true })),
  latestRecord: publicProcedure
    .meta({ openapi: { method: 'GET', path: '/api/v1/domains/{id}/records/latest' } })
    .input(byId)
    .output(ok)
    .query(() => ({ ok: true })),
  versionedFile: publicProcedure
    .meta({ openapi: { method: 'GET', path: '/api/v1/files.v2/{id}' } })
    .input(byId)
    .output(ok)
    .query(() => ({ ok: true })),
  disabled: publicProcedure
    .meta({ openapi: { method: 'GET', path: '/api/v1/disabled', enabled: false } })
    .input(z.object({}))
    .output(ok)
    .query(() => ({ ok: true })),
  trpcOnly: publicProcedure
    .input(z.object({}))
    .output(ok)
    .query(() => ({ ok: true })),
});

function hit(table: RouteTable, method: string, path: string) {
  const result = table.match(method, path);
  if (!result || !('route' in result)) throw new Error(`${method} ${path}: expected a route, got ${JSON.stringify(result)}`);
  return { procedure: result.route.procedurePath, params: result.params };
}

describe('buildRouteTable', () => {
  const table = buildRouteTable(testRouter);

  it('lists only procedures with an enabled openapi meta', () => {
    expect(table.routes.map((r) => r.procedurePath).sort()).toEqual(
      ['checkReserved', 'createDomain', 'deleteDomain', 'getDomain', 'getRecord', 'latestRecord', 'listDomains', 'versionedFile'].sort(),
    );
    const getDomain = table.routes.find((r) => r.procedurePath === 'getDomain')!;
    expect(getDomain).toMatchObject({ method: 'GET', path: '/api/v1/domains/{id}', paramNames: ['id'] });
    expect(getDomain.meta.auth).toBe('public');
    expect(table.routes.find((r) => r.procedurePath === 'getRecord')!.paramNames).toEqual(['id', 'recordId']);
  });

  it('a static path wins over a parameterised one registered before it', () => {
    expect(hit(table, 'GET', '/api/v1/domains/check-reserved')).toEqual({ procedure: 'checkReserved', params: {} });
    expect(hit(table, 'GET', '/api/v1/domains/check-reserved/')).toEqual({ procedure: 'checkReserved', params: {} });
    expect(hit(table, 'GET', '/api/v1/domains/x/records/latest')).toEqual({ procedure: 'latestRecord', params: { id: 'x' } });
    expect(hit(table, 'GET', '/api/v1/domains/x/records/r1')).toEqual({ procedure: 'getRecord', params: { id: 'x', recordId: 'r1' } });
  });

  it('captures and percent-decodes parameters', () => {
    expect(hit(table, 'GET', '/api/v1/domains/abc')).toEqual({ procedure: 'getDomain', params: { id: 'abc' } });
    expect(hit(table, 'DELETE', '/api/v1/domains/abc')).toEqual({ procedure: 'deleteDomain', params: { id: 'abc' } });
    expect(hit(table, 'GET', '/api/v1/domains/a%20b%2Fc')).toEqual({ procedure: 'getDomain', params: { id: 'a b/c' } });
    expect(hit(table, 'GET', '/api/v1/domains/caf%C3%A9')).toEqual({ procedure: 'getDomain', params: { id: 'café' } });
    expect(hit(table, 'GET', '/api/v1/domains/check%2Dreserved').procedure).toBe('getDomain');
    expect(hit(table, 'GET', '/api/v1/domains/%7Bid%7D/records/%25')).toEqual({ procedure: 'getRecord', params: { id: '{id}', recordId: '%' } });
  });

  it('a malformed percent-escape is a parameter value as sent: the operation refuses it after authentication', () => {
    for (const id of ['%', '%E0%A4%A', '%zz', '%C3']) {
      expect(hit(table, 'GET', `/api/v1/domains/${id}`), id).toEqual({ procedure: 'getDomain', params: { id } });
    }
  });

  it('tolerates one trailing slash', () => {
    expect(hit(table, 'GET', '/api/v1/domains/')).toEqual({ procedure: 'listDomains', params: {} });
    expect(hit(table, 'POST', '/api/v1/domains/')).toEqual({ procedure: 'createDomain', params: {} });
    expect(hit(table, 'GET', '/api/v1/domains/abc/')).toEqual({ procedure: 'getDomain', params: { id: 'abc' } });
    expect(hit(table, 'GET', '/api/v1/domains/a/records/b/')).toEqual({ procedure: 'getRecord', params: { id: 'a', recordId: 'b' } });
  });

  it('answers { allowed } when the path exists with other methods', () => {
    const sorted = (r: ReturnType<RouteTable['match']>) => {
      if (!r || !('allowed' in r)) throw new Error(`expected { allowed }, got ${JSON.stringify(r)}`);
      return [...r.allowed].sort();
    };
    expect(sorted(table.match('PUT', '/api/v1/domains/abc'))).toEqual(['DELETE', 'GET']);
    expect(sorted(table.match('DELETE', '/api/v1/domains'))).toEqual(['GET', 'POST']);
    expect(sorted(table.match('PATCH', '/api/v1/domains/'))).toEqual(['GET', 'POST']);
    expect(sorted(table.match('POST', '/api/v1/domains/check-reserved'))).toEqual(['GET']);
    expect(sorted(table.match('DELETE', '/api/v1/domains/x/records/latest'))).toEqual(['GET']);
    expect(table.match('POST', '/api/v1/domains/abc')).toEqual({ allowed: ['GET', 'DELETE'] });
  });

  it('unknown paths match nothing', () => {
    for (const path of [
      '/api/v1/nope',
      '/api/v1/domains/a/b',
      '/api/v1/domains/a/records',
      '/api/v1/domains//',
      '/api/v1',
      '/',
      '',
      '/api/v1/domainsX',
      '/API/V1/DOMAINS',
      '/api/v1/disabled',
      '/api/v1/domains/abc//',
      '/prefix/api/v1/domains',
      '/api/v1/filesXv2/abc',
    ]) {
      expect(table.match('GET', path), path).toBeNull();
      expect(table.match('POST', path), path).toBeNull();
    }
    expect(hit(table, 'GET', '/api/v1/files.v2/abc')).toEqual({ procedure: 'versionedFile', params: { id: 'abc' } });
  });
});

describe('buildRouteTable over the real appRouter', () => {
  const table = buildRouteTable(appRouter);

  it('has routes, all under /api/v1 with a known method', () => {
    expect(table.routes.length).toBeGreaterThan(10);
    for (const route of table.routes) {
      expect(route.path, route.procedurePath).toMatch(/^\/api\/v1\//);
      expect(['GET', 'POST', 'PUT', 'PATCH', 'DELETE']).toContain(route.method);
    }
  });

  it('no two routes share method + path (also ignoring parameter names)', () => {
    const seen = new Map<string, string>();
    for (const route of table.routes) {
      const key = `${route.method} ${route.path.replace(/\{\w+\}/g, '{}')}`;
      expect(seen.get(key), `${key}: ${seen.get(key)} and ${route.procedurePath}`).toBeUndefined();
      seen.set(key, route.procedurePath);
    }
    expect(seen.size).toBe(table.routes.length);
  });

  it('every route is reachable: a concrete path for it matches that very route', () => {
    for (const route of table.routes) {
      const concrete = route.path.replace(/\{\w+\}/g, 'sample-value-1');
      const result = table.match(route.method, concrete);
      expect(result && 'route' in result ? result.route.procedurePath : result, `${route.method} ${concrete}`).toBe(route.procedurePath);
    }
  });

  it('every path parameter is a whole {word} segment', () => {
    for (const route of table.routes) {
      expect(route.path.match(/[{}]/g)?.length ?? 0, route.path).toBe(route.paramNames.length * 2);
    }
  });
});
