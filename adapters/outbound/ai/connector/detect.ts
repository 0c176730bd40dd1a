/**
 * Endpoint type detection from the owner-configured URL (the owner may
 * override it with ConnectorRequest.type).
 *
 * Rules, first match wins:
 *  1. Flow platform (Langflow) — one of three markers:
 *       a. `langflow` anywhere in the host or the path (self-hosted
 *          `langflow.example.com`, `/langflow/api/v1/run/<id>`, Langflow's own
 *          cloud `api.langflow.astra.datastax.com`);
 *       b. a `datastax.com` host (DataStax, Langflow's hosted cloud);
 *       c. an `astra` host label (e.g. `*.astra.datastax.com`, `astra-*`), whole
 *          label or dash-separated part, never a substring such as `pastrami`.
 *  2. OpenAI-compatible by path — the path contains `/v1/chat/completions`
 *     (local model servers too: Ollama, LM Studio, vLLM, llama.cpp), or a
 *     known provider host's path contains `/chat/completions` (the
 *     OpenAI-compatible endpoints of Gemini `/v1beta/openai/chat/completions`
 *     and Anthropic).
 *  3. Messages-style (Anthropic) — host `api.anthropic.com` (or a subdomain of `anthropic.com`).
 *  4. Generation-style (Google Gemini) — host `generativelanguage.googleapis.com`.
 *  5. OpenAI-compatible by host — api.openai.com, openrouter.ai,
 *     api.groq.com, api.together.xyz, api.mistral.ai, api.deepseek.com,
 *     api.fireworks.ai (and their subdomains).
 *  6. Messages-style by name — the word `claude` anywhere in the URL.
 *  7. Generic — anything else, including URLs that do not parse.
 */
import type { EndpointType } from './types.ts';

export const OPENAI_COMPATIBLE_HOSTS = [
  'api.openai.com',
  'openrouter.ai',
  'api.groq.com',
  'api.together.xyz',
  'api.mistral.ai',
  'api.deepseek.com',
  'api.fireworks.ai',
] as const;

export const GEMINI_HOST = 'generativelanguage.googleapis.com';

export function detectEndpointType(url: string): EndpointType {
  let parsed: URL;
  try {
    parsed = new URL(url.trim());
  } catch {
    return 'generic';
  }
  const host = parsed.hostname.toLowerCase().replace(/\.$/, '');
  const path = safeDecode(parsed.pathname).toLowerCase();

  if (isFlowHost(host) || path.includes('langflow')) return 'flow';

  const anthropic = hostIs(host, 'anthropic.com');
  const gemini = hostIs(host, GEMINI_HOST);
  const openaiHost = OPENAI_COMPATIBLE_HOSTS.some((h) => hostIs(host, h));
  if (path.includes('/v1/chat/completions')) return 'openai';
  if ((anthropic || gemini || openaiHost) && path.includes('/chat/completions')) return 'openai';

  if (anthropic) return 'messages';
  if (gemini) return 'generation';
  if (openaiHost) return 'openai';

  if (safeDecode(`${host}${parsed.pathname}${parsed.search}`).toLowerCase().includes('claude')) return 'messages';
  return 'generic';
}

/** The host of a Langflow deployment by markers a, b, c above (path markers are checked separately). */
function isFlowHost(host: string): boolean {
  if (host.includes('langflow')) return true;
  if (hostIs(host, 'datastax.com')) return true;
  return host.split('.').some((label) => label.split('-').includes('astra'));
}

/** `host` is `domain` or one of its subdomains. */
export function hostIs(host: string, domain: string): boolean {
  return host === domain || host.endsWith(`.${domain}`);
}

function safeDecode(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}
