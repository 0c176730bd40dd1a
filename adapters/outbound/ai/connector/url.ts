/**
 * Endpoint URL handling: query-parameter API keys, the `model=` convention
 * and the per-type request URLs. Query strings are edited part by part, so
 * the owner's other parameters keep their exact encoding.
 */
import { chatCompletionsUrl } from '../openai-chat.ts';
import type { EndpointType } from './types.ts';

/** Query parameter names that carry an API key (`api_key`, `apiKey`, `api-key`, `apikey`). */
const API_KEY_PARAM = /^api[-_]?key$/i;
/** Gemini's own key parameter. */
const GEMINI_KEY_PARAM = /^key$/i;

/**
 * A value the owner left to be filled in: empty, or a placeholder such as
 * `{API_KEY}`, `{{API_KEY}}`, `<API_KEY>`, `$API_KEY`, `YOUR_API_KEY`,
 * `your-api-key-here`, `xxx`.
 */
export function isKeyPlaceholder(value: string): boolean {
  const v = value.trim();
  if (v === '') return true;
  if (/^(x+|\*+|\.+)$/i.test(v)) return true;
  return /^(?:[{<[$%]+\s*)?(?:your[\s_-]*)?(?:api[\s_-]*)?key(?:[\s_-]*here)?(?:\s*[}>\]]+)?$/i.test(v);
}

interface QueryPart {
  raw: string;
  name: string;
  value: string;
}

/** Base and query parts; a fragment is dropped (it is never sent on the wire). */
function splitUrl(url: string): { base: string; parts: QueryPart[] } {
  const hashAt = url.indexOf('#');
  const withoutHash = hashAt === -1 ? url : url.slice(0, hashAt);
  const queryAt = withoutHash.indexOf('?');
  if (queryAt === -1) return { base: withoutHash, parts: [] };
  const parts = withoutHash
    .slice(queryAt + 1)
    .split('&')
    .filter((raw) => raw !== '')
    .map((raw) => {
      const eq = raw.indexOf('=');
      return { raw, name: decodeQuery(eq === -1 ? raw : raw.slice(0, eq)), value: decodeQuery(eq === -1 ? '' : raw.slice(eq + 1)) };
    });
  return { base: withoutHash.slice(0, queryAt), parts };
}

function joinUrl(base: string, parts: QueryPart[]): string {
  return parts.length === 0 ? base : `${base}?${parts.map((p) => p.raw).join('&')}`;
}

function decodeQuery(text: string): string {
  try {
    return decodeURIComponent(text.replace(/\+/g, ' '));
  } catch {
    return text;
  }
}

/**
 * Fills the key parameters (`api_key` and variants; `key` too when
 * `includeGeminiKey`) whose value is empty or a placeholder. A URL without
 * such a parameter is returned unchanged: keys then travel in headers.
 */
export function fillKeyParams(url: string, apiKey: string | undefined, includeGeminiKey: boolean): string {
  if (apiKey === undefined || apiKey === '') return url;
  const { base, parts } = splitUrl(url);
  let changed = false;
  for (const part of parts) {
    const isKeyParam = API_KEY_PARAM.test(part.name) || (includeGeminiKey && GEMINI_KEY_PARAM.test(part.name));
    if (isKeyParam && isKeyPlaceholder(part.value)) {
      const rawName = part.raw.includes('=') ? part.raw.slice(0, part.raw.indexOf('=')) : part.raw;
      part.raw = `${rawName}=${encodeURIComponent(apiKey)}`;
      changed = true;
    }
  }
  return changed ? joinUrl(base, parts) : url;
}

/** The decoded value of the first query parameter `name`, or undefined. */
export function queryParam(url: string, name: string): string | undefined {
  return splitUrl(url).parts.find((p) => p.name === name)?.value;
}

export function removeQueryParam(url: string, name: string): string {
  const { base, parts } = splitUrl(url);
  const kept = parts.filter((p) => p.name !== name);
  return kept.length === parts.length ? url : joinUrl(base, kept);
}

/** Sets `name=value` (replacing existing occurrences, appended otherwise). */
export function setQueryParam(url: string, name: string, value: string): string {
  const { base, parts } = splitUrl(url);
  const raw = `${encodeURIComponent(name)}=${encodeURIComponent(value)}`;
  const at = parts.findIndex((p) => p.name === name);
  const next = parts.filter((p, i) => p.name !== name || i === at);
  if (at === -1) next.push({ raw, name, value });
  else {
    const kept = next.find((p) => p.name === name);
    if (kept) kept.raw = raw;
  }
  return joinUrl(base, next);
}

/** Replaces the path of an absolute URL, keeping its query. Unparseable URLs are returned as they are (the guarded client reports them). */
function withPath(url: string, transform: (path: string) => string): string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return url;
  }
  const { parts } = splitUrl(url);
  const base = `${parsed.protocol}//${parsed.host}${transform(parsed.pathname)}`;
  return joinUrl(base, parts);
}

export const DEFAULT_MODELS = {
  openai: 'gpt-4o-mini',
  messages: 'claude-haiku-4-5',
  generation: 'gemini-2.5-flash',
} as const;

/** Sensible default models of the OpenAI-compatible hosts other than OpenAI. */
const OPENAI_COMPATIBLE_DEFAULT_MODELS: Array<[string, string]> = [
  ['openrouter.ai', 'openai/gpt-4o-mini'],
  ['api.groq.com', 'llama-3.1-8b-instant'],
  ['api.together.xyz', 'meta-llama/Llama-3.3-70B-Instruct-Turbo'],
  ['api.mistral.ai', 'mistral-small-latest'],
  ['api.deepseek.com', 'deepseek-chat'],
  ['api.fireworks.ai', 'accounts/fireworks/models/llama-v3p1-8b-instruct'],
];

function hostname(url: string): string {
  try {
    return new URL(url).hostname.toLowerCase();
  } catch {
    return '';
  }
}

export interface ResolvedEndpoint {
  /** URL to POST to (key parameters filled, our `model=` parameter removed). */
  url: string;
  /** openai, messages, generation: the model to ask for. */
  model: string;
}

/**
 * The request URL and model for `type`. `model=` in the query is our
 * convention for the chat types and is not forwarded; flow and generic URLs
 * are the owner's own API and are kept as they are (key filling apart).
 */
export function resolveEndpoint(type: EndpointType, endpointUrl: string, apiKey: string | undefined, stream: boolean): ResolvedEndpoint {
  let url = fillKeyParams(endpointUrl.trim(), apiKey, type === 'generation');
  const requested = queryParam(url, 'model')?.trim();
  const model = requested !== undefined && requested !== '' ? requested : undefined;

  switch (type) {
    case 'openai': {
      url = removeQueryParam(url, 'model');
      const host = hostname(url);
      const fallback = OPENAI_COMPATIBLE_DEFAULT_MODELS.find(([h]) => host === h || host.endsWith(`.${h}`))?.[1] ?? DEFAULT_MODELS.openai;
      return { url: /\/chat\/completions\/?(\?|$)/i.test(url) ? url : chatCompletionsUrl(url), model: model ?? fallback };
    }
    case 'messages': {
      url = removeQueryParam(url, 'model');
      // A base URL (`https://api.anthropic.com`, `.../v1`) gets the messages path; any other path is the owner's proxy route.
      url = withPath(url, (path) => {
        const trimmed = path.replace(/\/+$/, '');
        if (trimmed === '') return '/v1/messages';
        if (/\/v1$/i.test(trimmed)) return `${trimmed}/messages`;
        return path;
      });
      return { url, model: model ?? DEFAULT_MODELS.messages };
    }
    case 'generation': {
      // The model lives in the path: /v1beta/models/<model>:generateContent.
      let pathModel: string | undefined;
      url = withPath(url, (path) => {
        const match = /\/models\/([^/:]+)(?::([A-Za-z]+))?\/?$/.exec(path);
        if (match && match[1] !== undefined) {
          pathModel = decodeQuery(match[1]);
          const prefix = path.slice(0, match.index);
          return `${prefix}/models/${match[1]}:${stream ? 'streamGenerateContent' : 'generateContent'}`;
        }
        const chosen = encodeURIComponent(model ?? DEFAULT_MODELS.generation);
        const trimmed = path.replace(/\/+$/, '');
        const versioned = /\/v\d+(beta|alpha)?\d*$/i.test(trimmed) ? trimmed : `${trimmed}/v1beta`;
        return `${versioned}/models/${chosen}:${stream ? 'streamGenerateContent' : 'generateContent'}`;
      });
      url = removeQueryParam(url, 'model');
      if (stream) url = setQueryParam(url, 'alt', 'sse');
      return { url, model: pathModel ?? model ?? DEFAULT_MODELS.generation };
    }
    case 'flow':
      return { url: stream ? setQueryParam(url, 'stream', 'true') : url, model: '' };
    case 'generic':
      return { url, model: '' };
  }
}
