import type { AnyRouter } from '@trpc/server';
import type { AppMeta } from '../../../routers/trpc.ts';

export interface RestRoute {
  method: string;
  /** The spec path with `{param}` placeholders. */
  path: string;
  procedurePath: string;
  meta: AppMeta;
  paramNames: string[];
  pattern: RegExp;
  staticSegments: number;
}

export interface RouteTable {
  routes: RestRoute[];
  match(method: string, path: string): { route: RestRoute; params: Record<string, string> } | { allowed: string[] } | null;
}

/**
 * Reads every procedure's meta.openapi once and answers "which procedure serves METHOD /path". Static paths
 * are a map lookup; parameterised ones are tried most-specific first (more literal segments win), so
 * `/domains/check-reserved` is never captured by `/domains/{id}`.
 */
export function buildRouteTable(router: AnyRouter): RouteTable {
  const routes: RestRoute[] = [];
  for (const [procedurePath, procedure] of Object.entries(router._def.procedures as Record<string, { _def: { meta?: AppMeta } }>)) {
    const meta = procedure._def.meta;
    const openapi = meta?.openapi;
    if (!openapi || openapi.enabled === false) continue;
    const paramNames: string[] = [];
    const segments = openapi.path.split('/').filter(Boolean);
    const source = segments
      .map((segment) => {
        const param = /^\{(\w+)\}$/.exec(segment);
        if (!param) return segment.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
        paramNames.push(param[1]!);
        return '([^/]+)';
      })
      .join('/');
    routes.push({
      method: openapi.method,
      path: openapi.path,
      procedurePath,
      meta,
      paramNames,
      pattern: new RegExp(`^/${source}/?$`),
      staticSegments: segments.length - paramNames.length,
    });
  }
  const staticRoutes = new Map<string, RestRoute>();
  const dynamic = routes.filter((r) => r.paramNames.length > 0).sort((a, b) => b.staticSegments - a.staticSegments);
  for (const route of routes) if (route.paramNames.length === 0) staticRoutes.set(`${route.method} ${route.path}`, route);

  const find = (method: string, path: string) => {
    const exact = staticRoutes.get(`${method} ${path.length > 1 && path.endsWith('/') ? path.slice(0, -1) : path}`);
    if (exact) return { route: exact, params: {} };
    for (const route of dynamic) {
      if (route.method !== method) continue;
      const m = route.pattern.exec(path);
      if (!m) continue;
      const params: Record<string, string> = {};
      try {
        route.paramNames.forEach((name, i) => {
          params[name] = decodeURIComponent(m[i + 1]!);
        });
      } catch {
        return null; // a malformed %-escape names no resource
      }
      return { route, params };
    }
    return null;
  };

  return {
    routes,
    match(method, path) {
      const hit = find(method, path);
      if (hit) return hit;
      const allowed = [...new Set(routes.filter((r) => r.method !== method && find(r.method, path)?.route === r).map((r) => r.method))];
      return allowed.length ? { allowed } : null;
    },
  };
}
