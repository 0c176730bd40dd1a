import type { AnyRouter } from '@trpc/server';
import type { AppMeta } from '../../../routers/trpc.ts';

export interface RestRoute {
  method: string;
  /** The spec path with `{param}` placeholders. */
  path: string;
  procedurePath: string;
  meta: AppMeta;
  paramNames: string[];
}

export interface RouteTable {
  routes: RestRoute[];
  match(method: string, path: string): { route: RestRoute; params: Record<string, string> } | { allowed: string[] } | null;
}

/** One position in the path templates: its literal continuations, its parameter continuation, the routes ending here. */
interface Node {
  literals: Map<string, Node>;
  param?: Node;
  /** By method, in registration order (the order of a 405's Allow). */
  routes: Map<string, RestRoute>;
}

const newNode = (): Node => ({ literals: new Map(), routes: new Map() });

/** The path's segments, one trailing slash tolerated; an empty segment matches no template. */
function segmentsOf(path: string): string[] | undefined {
  if (!path.startsWith('/')) return undefined;
  const body = path.length > 1 && path.endsWith('/') ? path.slice(1, -1) : path.slice(1);
  return body.split('/');
}

/**
 * The most specific template matching the segments: at the first position where two templates differ, a literal
 * beats a parameter. Templates that end without a route of their own are passed over. Captured values are
 * pushed to `captured` in order.
 */
function walk(node: Node, segments: string[], index: number, captured: string[]): Node | undefined {
  if (index === segments.length) return node.routes.size > 0 ? node : undefined;
  const segment = segments[index]!;
  const literal = node.literals.get(segment);
  if (literal) {
    const found = walk(literal, segments, index + 1, captured);
    if (found) return found;
  }
  if (node.param && segment !== '') {
    captured.push(segment);
    const found = walk(node.param, segments, index + 1, captured);
    if (found) return found;
    captured.pop();
  }
  return undefined;
}

/**
 * Reads every procedure's meta.openapi once and answers "which procedure serves METHOD /path". A path is
 * claimed by its most specific template, whatever the method: `/domains/sync` belongs to the literal `sync`
 * operation alone, so GET on it is a 405 naming POST, and `/domains/{id}` never treats `sync` as an id.
 */
export function buildRouteTable(router: AnyRouter): RouteTable {
  const routes: RestRoute[] = [];
  const root = newNode();
  for (const [procedurePath, procedure] of Object.entries(router._def.procedures as Record<string, { _def: { meta?: AppMeta } }>)) {
    const meta = procedure._def.meta;
    const openapi = meta?.openapi;
    if (!openapi || openapi.enabled === false) continue;
    const paramNames: string[] = [];
    let node = root;
    const segments = openapi.path.split('/').filter(Boolean);
    for (const segment of segments) {
      const param = /^\{(\w+)\}$/.exec(segment);
      if (param) {
        paramNames.push(param[1]!);
        node = node.param ??= newNode();
      } else {
        let next = node.literals.get(segment);
        if (!next) node.literals.set(segment, (next = newNode()));
        node = next;
      }
    }
    const route: RestRoute = {
      method: openapi.method,
      path: openapi.path,
      procedurePath,
      meta,
      paramNames,
    };
    // Two operations on one method and template would leave one unreachable: a mistake in the routers, not a choice.
    if (node.routes.has(route.method)) throw new Error(`${route.method} ${route.path} is declared twice`);
    routes.push(route);
    node.routes.set(route.method, route);
  }

  return {
    routes,
    match(method, path) {
      const segments = segmentsOf(path);
      if (!segments) return null;
      const captured: string[] = [];
      const node = walk(root, segments, 0, captured);
      if (!node) return null;
      // A malformed %-escape (%FF, %E0%A4%A) is passed on as sent: the route exists, so the caller is authenticated
      // first and the operation then refuses the value (400 from its schema, or 404: it names no resource).
      const values = captured.map(decodeParam);
      const route = node.routes.get(method);
      if (!route) return { allowed: [...node.routes.keys()] };
      return { route, params: Object.fromEntries(route.paramNames.map((name, i) => [name, values[i]!])) };
    },
  };
}

function decodeParam(value: string): string {
  try {
    return decodeURIComponent(value);
  } catch {
    return value;
  }
}
