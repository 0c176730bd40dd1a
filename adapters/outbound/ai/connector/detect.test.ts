import { describe, expect, it } from 'vitest';
import { detectEndpointType } from './detect.ts';
import type { EndpointType } from './types.ts';

const TABLE: Array<[string, EndpointType]> = [
  // Flow platform: `langflow` in host or path, a datastax.com host, an `astra` host label.
  ['https://api.langflow.astra.datastax.com/lf/abc-123/api/v1/run/flow-1', 'flow'],
  ['https://langflow.example.com/api/v1/run/9f3c1b2e', 'flow'],
  ['https://my-langflow-box.example.org:7860/api/v1/run/flow', 'flow'],
  ['https://tools.example.com/langflow/api/v1/run/flow', 'flow'],
  ['https://tools.example.com/LangFlow/api/v1/run/flow', 'flow'],
  ['https://tools.example.com/%6Cangflow/api/v1/run/flow', 'flow'],
  ['https://flows.datastax.com/api/v1/run/abc', 'flow'],
  ['https://datastax.com/x', 'flow'],
  ['https://astra.example.net/api/v1/run/abc', 'flow'],
  ['https://eu.astra-cloud.example.net/api/v1/run/abc', 'flow'],
  // Flow markers win over everything else.
  ['https://langflow.example.com/v1/chat/completions', 'flow'],
  // ...but not as a substring of another word or outside host/path.
  ['https://pastrami.example.com/api/chat', 'generic'],
  ['https://notdatastax.com/api/chat', 'generic'],
  ['https://bot.example.com/api?engine=langflow', 'generic'],
  ['https://example.com/api/v1/run/abc', 'generic'],

  // OpenAI-compatible hosts.
  ['https://api.openai.com/v1/chat/completions', 'openai'],
  ['https://api.openai.com/v1', 'openai'],
  ['https://api.openai.com', 'openai'],
  ['https://openrouter.ai/api/v1/chat/completions', 'openai'],
  ['https://openrouter.ai/api/v1/chat/completions?model=anthropic/claude-3.5-sonnet', 'openai'],
  ['https://api.groq.com/openai/v1/chat/completions', 'openai'],
  ['https://api.together.xyz/v1/chat/completions', 'openai'],
  ['https://api.mistral.ai/v1/chat/completions', 'openai'],
  ['https://api.deepseek.com/chat/completions', 'openai'],
  ['https://api.fireworks.ai/inference/v1/chat/completions', 'openai'],
  ['https://API.OPENAI.COM./v1/chat/completions', 'openai'],
  // The path, wherever the server is (local model servers too).
  ['http://localhost:11434/v1/chat/completions', 'openai'],
  ['http://127.0.0.1:1234/v1/chat/completions', 'openai'],
  ['http://[::1]:8000/v1/chat/completions', 'openai'],
  ['http://192.168.1.20:8080/v1/chat/completions?model=llama3.2', 'openai'],
  ['https://llm.example.com/proxy/v1/chat/completions', 'openai'],
  ['https://claude-gateway.example.com/v1/chat/completions', 'openai'],
  // OpenAI-compatible endpoints of the other providers.
  ['https://generativelanguage.googleapis.com/v1beta/openai/chat/completions', 'openai'],
  ['https://api.anthropic.com/v1/chat/completions', 'openai'],
  // Look-alike hosts are not the provider.
  ['https://api.openai.com.evil.example/x', 'generic'],
  ['https://notopenrouter.ai/api', 'generic'],

  // Messages-style (Anthropic).
  ['https://api.anthropic.com/v1/messages', 'messages'],
  ['https://api.anthropic.com', 'messages'],
  ['https://proxy.example.com/claude/v1/messages', 'messages'],
  ['https://claude.example.com/api', 'messages'],
  ['https://gateway.example.com/chat?model=claude-3-5-haiku-latest', 'messages'],

  // Generation-style (Gemini).
  ['https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:generateContent', 'generation'],
  ['https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:generateContent?key=', 'generation'],
  ['https://generativelanguage.googleapis.com', 'generation'],

  // Generic.
  ['https://bot.example.com/webhook', 'generic'],
  ['https://example.com/api/chat?api_key={API_KEY}', 'generic'],
  ['https://example.com/v1/chat', 'generic'],
  ['https://example.com/chat/completions', 'generic'],
  ['not a url', 'generic'],
  ['', 'generic'],
];

describe('detectEndpointType', () => {
  it.each(TABLE)('%s → %s', (url, expected) => {
    expect(detectEndpointType(url)).toBe(expected);
  });

  it('ignores surrounding whitespace', () => {
    expect(detectEndpointType('  https://api.anthropic.com/v1/messages \n')).toBe('messages');
  });
});
