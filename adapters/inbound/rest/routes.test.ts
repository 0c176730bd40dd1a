import { z } from 'zod';
import { describe, expect, it } from 'vitest';
import { appRouter } from '../../../routers/app-router.ts';
import { publicProcedure, router } from '../../../routers/trpc.ts';
import { buildRouteTable, type RouteTable } from './routes.ts';

const ok = z.object({ ok: z.boolean() });
const any = z.object({}).passthrough();

function route(method: 'GET' | 'POST' | 'PATCH' | 'DELETE', path: `/${string}`) {
  const procedure = publicProcedure.meta({ openapi: { method, path } }).input(any).output(ok);
  return method === 'GET' ? procedure.query(() => ({ ok: true })) : procedure.mutation(() => ({ ok: true }));
}

// Parameterised routes are registered first, so registration order cannot be what decides.
const overlapping = router({
  getDomain: route('GET', '/api/v1/domains/{id}'),
  updateDomain: route('PATCH', '/api/v1/domains/{id}'),
  deleteDomain: route('DELETE', '/api/v1/domains/{id}'),
  checkReserved: route('GET', '/api/v1/domains/check-reserved'),
  sync: route('POST', '/api/v1/domains/sync'),
  deleteDocument: route('DELETE', '/api/v1/documents/{id}'),
  bulkDelete: route('POST', '/api/v1/documents/bulk-delete'),
  getRecord: route('GET', '/api/v1/zones/{zone}/records/{record}'),
  latestRecord: route('GET', '/api/v1/zones/{zone}/records/latest'),
  firstParam: route('GET', '/api/v1/a/{x}/c'),
  firstLiteral: route('DELETE', '/api/v1/a/b/{y}'),
  account: route('GET', '/api/v1/accounts/{accountId}'),
  oauthCallback: route('GET', '/api/v1/accounts/oauth/callback'),
});

function outcome(table: RouteTable, method: string, path: string) {
  const result = table.match(method, path);
  if (!result) return null;
  return 'route' in result ? { procedure: result.route.procedurePath, params: result.params } : { allowed: result.allowed };
}

describe('a path matching a literal route belongs to the literal routes only', () => {
  const table = buildRouteTable(overlapping);

  it('a method the literal route lacks is a 405 naming the literal route’s methods, never a parameter route', () => {
    expect(outcome(table, 'GET', '/api/v1/domains/sync')).toEqual({ allowed: ['POST'] });
    expect(outcome(table, 'PATCH', '/api/v1/domains/sync')).toEqual({ allowed: ['POST'] });
    expect(outcome(table, 'GET', '/api/v1/domains/sync/')).toEqual({ allowed: ['POST'] });
    for (const method of ['POST', 'PATCH', 'DELETE', 'PUT']) {
      expect(outcome(table, method, '/api/v1/domains/check-reserved'), method).toEqual({ allowed: ['GET'] });
    }
    expect(outcome(table, 'DELETE', '/api/v1/documents/bulk-delete')).toEqual({ allowed: ['POST'] });
    expect(outcome(table, 'GET', '/api/v1/zones/z1/records/latest')).toEqual({ procedure: 'latestRecord', params: { zone: 'z1' } });
  });

  it('the literal routes still serve their own methods, and other values still reach the parameter routes', () => {
    expect(outcome(table, 'POST', '/api/v1/domains/sync')).toEqual({ procedure: 'sync', params: {} });
    expect(outcome(table, 'GET', '/api/v1/domains/check-reserved')).toEqual({ procedure: 'checkReserved', params: {} });
    expect(outcome(table, 'PATCH', '/api/v1/domains/synced')).toEqual({ procedure: 'updateDomain', params: { id: 'synced' } });
    expect(outcome(table, 'POST', '/api/v1/domains/abc')).toEqual({ allowed: ['GET', 'PATCH', 'DELETE'] });
    expect(outcome(table, 'DELETE', '/api/v1/documents/d1')).toEqual({ procedure: 'deleteDocument', params: { id: 'd1' } });
    expect(outcome(table, 'GET', '/api/v1/zones/z1/records/r1')).toEqual({ procedure: 'getRecord', params: { zone: 'z1', record: 'r1' } });
  });

  it('the first segment where templates differ decides: a literal there wins, whatever comes after', () => {
    // `/a/b/c` fits both `/a/{x}/c` and `/a/b/{y}`; `b` is a literal at the earlier position.
    expect(outcome(table, 'DELETE', '/api/v1/a/b/c')).toEqual({ procedure: 'firstLiteral', params: { y: 'c' } });
    expect(outcome(table, 'GET', '/api/v1/a/b/c')).toEqual({ allowed: ['DELETE'] });
    expect(outcome(table, 'GET', '/api/v1/a/other/c')).toEqual({ procedure: 'firstParam', params: { x: 'other' } });
  });

  it('a literal segment that only leads to longer routes does not claim the path', () => {
    expect(outcome(table, 'GET', '/api/v1/accounts/oauth')).toEqual({ procedure: 'account', params: { accountId: 'oauth' } });
    expect(outcome(table, 'GET', '/api/v1/accounts/oauth/callback')).toEqual({ procedure: 'oauthCallback', params: {} });
    expect(outcome(table, 'GET', '/api/v1/accounts/x/callback')).toBeNull();
  });

  it('a literal is compared as sent: an escaped spelling is a parameter value, and a malformed escape is a value as sent', () => {
    expect(outcome(table, 'PATCH', '/api/v1/domains/sy%6Ec')).toEqual({ procedure: 'updateDomain', params: { id: 'sync' } });
    expect(outcome(table, 'PATCH', '/api/v1/domains/%E0%A4%A')).toEqual({ procedure: 'updateDomain', params: { id: '%E0%A4%A' } });
    expect(outcome(table, 'PATCH', '/api/v1/domains/%FF')).toEqual({ procedure: 'updateDomain', params: { id: '%FF' } });
    expect(outcome(table, 'GET', '/api/v1/domains/%E0%A4%A')).toEqual({ procedure: 'getDomain', params: { id: '%E0%A4%A' } });
    expect(outcome(table, 'POST', '/api/v1/domains/%E0%A4%A')).toEqual({ allowed: ['GET', 'PATCH', 'DELETE'] });
  });
});

describe('literal and parameter overlaps of the real appRouter', () => {
  const table = buildRouteTable(appRouter);
  const methods = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'];
  const concrete = (path: string) => path.replace(/\{\w+\}/g, 'sample-value-1');
  const shape = (path: string) => path.replace(/\{\w+\}/g, '{}');

  it('every template claims its own paths for every method: its route, or a 405 listing exactly its methods', () => {
    const methodsOf = new Map<string, string[]>();
    for (const r of table.routes) methodsOf.set(shape(r.path), [...(methodsOf.get(shape(r.path)) ?? []), r.method]);
    for (const [template, own] of methodsOf) {
      for (const method of methods) {
        const result = table.match(method, concrete(template));
        const where = `${method} ${template}`;
        if (own.includes(method)) expect(result && 'route' in result ? shape(result.route.path) : result, where).toBe(template);
        else expect(result, where).toEqual({ allowed: own });
      }
    }
  });

  it('the overlaps the auditors found answer as the literal operations say', () => {
    expect(outcome(table, 'GET', '/api/v1/domains/sync')).toEqual({ allowed: ['POST'] });
    expect(outcome(table, 'POST', '/api/v1/domains/check-reserved')).toEqual({ allowed: ['GET'] });
    expect(outcome(table, 'PATCH', '/api/v1/domains/check-reserved')).toEqual({ allowed: ['GET'] });
    expect(outcome(table, 'DELETE', '/api/v1/domains/route-public')).toEqual({ allowed: ['GET'] });
    expect(outcome(table, 'DELETE', '/api/v1/knowledge-base/documents/bulk-delete')).toEqual({ allowed: ['POST'] });
    expect(outcome(table, 'GET', '/api/v1/domains/d1')).toEqual({ procedure: 'domains.get', params: { id: 'd1' } });
  });
});
