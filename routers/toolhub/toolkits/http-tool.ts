/**
 * The generic HTTP tool: calls an endpoint the owner configured (per-account settings) with the model's
 * arguments as JSON (or as query parameters for GET), authenticated by an optional API key sent in a header
 * the owner names.
 *
 * The endpoint is owner-controlled, hence attacker-controlled from the service's point of view: it is
 * reached only through the guarded client, and a failing answer's body is never passed on.
 */
import { type GuardedResponse, RESERVED_HEADERS } from '../../../adapters/outbound/http/guarded-client.ts';
import { type JsonSchema, type ToolContext, ToolError, type Toolkit } from '../toolkit.ts';
import { isObject, unreachable } from './provider-kit.ts';
import { parseUntrustedJson } from '../../../schema/text-input.ts';
import { HEADER_VALUE } from '../../../schema/common.ts';

export const HTTP_METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'] as const;
export type HttpToolMethod = (typeof HTTP_METHODS)[number];

/** Non-JSON answers are returned as text cut to this many characters. */
const MAX_TEXT_LENGTH = 4000;
/** RFC 9110 token: what a header name may be. */
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,100}$/;
/**
 * Header names that would never deliver the key, so an account naming one would connect and then call the endpoint
 * unauthenticated: the guarded client drops and sets these itself, this tool sets Content-Type for a body, and the
 * rest are hop-by-hop (RFC 9110 7.6.1: proxies on the way drop them) or change how the exchange runs (Expect, Upgrade).
 */
const KEYLESS_HEADERS: ReadonlySet<string> = new Set([
  ...RESERVED_HEADERS,
  'content-type',
  'keep-alive',
  'proxy-connection',
  'te',
  'trailer',
  'upgrade',
  'expect',
]);

/** Why `name` cannot carry the key, or undefined when it can. */
function authHeaderProblem(name: string): string | undefined {
  if (!HEADER_NAME.test(name)) return 'not a valid header name';
  if (KEYLESS_HEADERS.has(name.toLowerCase())) {
    return `${name} cannot carry the key (the service or a proxy on the way sets or drops it); use Authorization or a header such as X-Api-Key`;
  }
  return undefined;
}

export interface HttpToolSettings {
  url: string;
  method: HttpToolMethod;
  authHeader?: string;
  authPrefix?: string;
  inputSchema: JsonSchema;
  description: string;
}

const settingsSchema: JsonSchema = {
  type: 'object',
  properties: {
    url: { type: 'string', format: 'uri', pattern: '^https?://', maxLength: 2048, description: 'The endpoint called (http or https)' },
    method: { type: 'string', enum: [...HTTP_METHODS], default: 'POST', description: 'GET sends the arguments as query parameters, the others as a JSON body' },
    authHeader: {
      type: 'string',
      pattern: HEADER_NAME.source,
      description:
        'The header carrying the API key (e.g. Authorization or X-Api-Key); Authorization when a key is set and this is not. Not Host, Content-Length, Content-Type, Transfer-Encoding, Connection or another hop-by-hop header',
    },
    authPrefix: { type: 'string', maxLength: 100, description: "Put before the key in that header (e.g. 'Bearer ')" },
    inputSchema: {
      type: 'object',
      properties: { type: { const: 'object' } },
      required: ['type'],
      description: "JSON Schema of the endpoint's arguments, offered to the model",
    },
    description: { type: 'string', minLength: 1, maxLength: 1000, description: 'What the endpoint does, offered to the model' },
  },
  required: ['url', 'inputSchema', 'description'],
  additionalProperties: false,
};

export const httpToolkit: Toolkit = {
  slug: 'http',
  name: 'HTTP endpoint',
  description: 'Let the model call an HTTP endpoint of yours with JSON arguments.',
  auth: { scheme: 'api_key', hint: 'The value sent in the header named in the settings' },
  apiBaseUrl: '',
  settingsSchema,
  settingsProblem(settings) {
    const authHeader = settings['authHeader'];
    const problem = typeof authHeader === 'string' ? authHeaderProblem(authHeader) : undefined;
    return problem === undefined ? undefined : `settings.authHeader: ${problem}`;
  },
  tools: [
    {
      name: 'call',
      description: "Calls the owner's HTTP endpoint with the arguments as JSON",
      inputSchema: { type: 'object', properties: {}, required: [], additionalProperties: true },
      async run(input, ctx) {
        const settings = readSettings(ctx.settings);
        const url = new URL(settings.url);
        let body: string | undefined;
        if (settings.method === 'GET') {
          for (const [name, value] of Object.entries(input)) appendQuery(url.searchParams, name, value);
        } else {
          body = JSON.stringify(input);
        }
        const headers: Record<string, string> = { accept: 'application/json, text/plain;q=0.9, */*;q=0.5', ...authHeaders(ctx, settings) };
        if (body !== undefined) headers['content-type'] = 'application/json';

        const res = await send(ctx, url.href, { method: settings.method, headers, body });
        if (res.status < 200 || res.status >= 300) {
          const retryable = res.status === 408 || res.status === 429 || res.status >= 500;
          throw new ToolError(`The endpoint answered ${res.status}`, retryable);
        }
        return readAnswer(res);
      },
    },
  ],

  async checkCredential(ctx) {
    let settings: HttpToolSettings;
    try {
      settings = readSettings(ctx.settings);
    } catch (err) {
      if (err instanceof ToolError) return { ok: false, reason: err.message };
      throw err;
    }
    const url = new URL('/', settings.url);
    try {
      const res = await send(ctx, url.href, { method: 'GET', headers: authHeaders(ctx, settings), body: undefined });
      if (res.status === 401 || res.status === 403) return { ok: false, reason: `The endpoint refused the key (${res.status})` };
      if (res.status >= 500) return { ok: false, reason: `The endpoint answered ${res.status}` };
      return { ok: true, identity: url.host };
    } catch (err) {
      if (err instanceof ToolError) return { ok: false, reason: err.message };
      throw err;
    }
  },

  statusUrl(apiBaseUrl) {
    // Every account has its own endpoint: there is no provider to watch (the status check skips '').
    return apiBaseUrl;
  },
};

/** The account's settings, checked: the schema is validated when they are saved, this guards the call itself. */
export function readSettings(raw: Record<string, unknown>): HttpToolSettings {
  const urlText = raw['url'];
  if (typeof urlText !== 'string' || urlText === '') throw new ToolError('The HTTP tool has no endpoint URL configured');
  let url: URL;
  try {
    url = new URL(urlText);
  } catch {
    throw new ToolError('The HTTP tool endpoint URL is not a valid URL');
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') throw new ToolError('The HTTP tool endpoint URL must be http or https');

  const method = raw['method'] ?? 'POST';
  if (typeof method !== 'string' || !(HTTP_METHODS as readonly string[]).includes(method.toUpperCase())) {
    throw new ToolError(`The HTTP tool method must be one of ${HTTP_METHODS.join(', ')}`);
  }
  const settings: HttpToolSettings = {
    url: url.href,
    method: method.toUpperCase() as HttpToolMethod,
    inputSchema: isObject(raw['inputSchema']) ? raw['inputSchema'] : { type: 'object' },
    description: typeof raw['description'] === 'string' ? raw['description'] : '',
  };
  const authHeader = raw['authHeader'];
  if (authHeader !== undefined && authHeader !== null && authHeader !== '') {
    if (typeof authHeader !== 'string') throw new ToolError('The HTTP tool auth header name is not a valid header name');
    const problem = authHeaderProblem(authHeader);
    if (problem !== undefined) throw new ToolError(`The HTTP tool auth header name: ${problem}`);
    settings.authHeader = authHeader;
  }
  const authPrefix = raw['authPrefix'];
  if (authPrefix !== undefined && authPrefix !== null) {
    if (typeof authPrefix !== 'string' || !HEADER_VALUE.test(authPrefix))
      throw new ToolError('The HTTP tool auth prefix contains characters a header cannot carry');
    settings.authPrefix = authPrefix;
  }
  return settings;
}

function authHeaders(ctx: ToolContext, settings: HttpToolSettings): Record<string, string> {
  const credential = ctx.credential;
  if (credential.kind === 'none') return {};
  if (credential.kind !== 'api_key') throw new ToolError('The HTTP tool takes an API key or no credential');
  if (credential.apiKey === '') return {};
  if (!HEADER_VALUE.test(credential.apiKey)) throw new ToolError('The API key contains characters a header cannot carry');
  // Without a header name, the usual bearer convention.
  const name = settings.authHeader ?? 'authorization';
  const prefix = settings.authPrefix ?? (settings.authHeader === undefined ? 'Bearer ' : '');
  return { [name.toLowerCase()]: `${prefix}${credential.apiKey}` };
}

async function send(
  ctx: ToolContext,
  url: string,
  init: { method: string; headers: Record<string, string>; body: string | undefined },
): Promise<GuardedResponse> {
  try {
    return await ctx.http.request(url, {
      method: init.method,
      headers: init.headers,
      ...(init.body !== undefined ? { body: init.body } : {}),
      timeoutMs: ctx.timeoutMs,
      ...(ctx.signal ? { signal: ctx.signal } : {}),
    });
  } catch (err) {
    throw unreachable('the endpoint', err);
  }
}

/** JSON when the answer is JSON, else `{status, text}` with the text cut to MAX_TEXT_LENGTH characters. */
function readAnswer(res: GuardedResponse): unknown {
  const text = res.text();
  const type = headerValue(res.headers['content-type'])?.toLowerCase() ?? '';
  const declaredJson = /^application\/([a-z0-9.+-]*\+)?json\b/.test(type) || type.startsWith('text/json');
  if (text.trim() !== '' && (declaredJson || type === '')) {
    try {
      return parseUntrustedJson(text);
    } catch {
      // Not JSON after all (or nested too deeply to keep): returned as text.
    }
  }
  if (text.length <= MAX_TEXT_LENGTH) return { status: res.status, text };
  let cut = text.slice(0, MAX_TEXT_LENGTH);
  // Never end on half a surrogate pair.
  if (/[\uD800-\uDBFF]$/.test(cut)) cut = cut.slice(0, -1);
  return { status: res.status, text: cut, truncated: true };
}

function appendQuery(params: URLSearchParams, name: string, value: unknown): void {
  if (value === undefined || value === null) return;
  if (Array.isArray(value)) {
    for (const item of value) {
      if (item === undefined || item === null) continue;
      params.append(name, typeof item === 'object' ? JSON.stringify(item) : String(item));
    }
    return;
  }
  params.append(name, typeof value === 'object' ? JSON.stringify(value) : String(value));
}

function headerValue(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}
