import { describe, expect, it } from 'vitest';
import { fillKeyParams, isKeyPlaceholder, queryParam, removeQueryParam, resolveEndpoint, setQueryParam } from './url.ts';

describe('isKeyPlaceholder', () => {
  it.each([
    '',
    ' ',
    '{API_KEY}',
    '{{API_KEY}}',
    '<API_KEY>',
    '$API_KEY',
    'YOUR_API_KEY',
    'your-api-key',
    'YOUR_API_KEY_HERE',
    '<your api key>',
    '[API_KEY]',
    'api_key',
    'key',
    'xxx',
    '***',
  ])('%j is a placeholder', (value) => expect(isKeyPlaceholder(value)).toBe(true));
  it.each(['sk-abc123', 'AIzaSyD-real', 'keyboard', 'monkey', '{SOMETHING}', 'x1'])('%j is a real value', (value) =>
    expect(isKeyPlaceholder(value)).toBe(false),
  );
});

describe('fillKeyParams', () => {
  const KEY = 'k/with+special&chars=1';
  const ENC = encodeURIComponent(KEY);

  it('fills empty and placeholder api_key parameters, URL-encoded, keeping the rest byte for byte', () => {
    expect(fillKeyParams('https://x.test/a?api_key=', KEY, false)).toBe(`https://x.test/a?api_key=${ENC}`);
    expect(fillKeyParams('https://x.test/a?api_key', KEY, false)).toBe(`https://x.test/a?api_key=${ENC}`);
    expect(fillKeyParams('https://x.test/a?q=a+b%20c&api_key={API_KEY}&z', KEY, false)).toBe(`https://x.test/a?q=a+b%20c&api_key=${ENC}&z`);
    expect(fillKeyParams('https://x.test/a?API_KEY=YOUR_API_KEY', KEY, false)).toBe(`https://x.test/a?API_KEY=${ENC}`);
    expect(fillKeyParams('https://x.test/a?apiKey=%7BAPI_KEY%7D#frag', KEY, false)).toBe(`https://x.test/a?apiKey=${ENC}`);
  });

  it('leaves real values, unrelated parameters and key-less URLs alone', () => {
    expect(fillKeyParams('https://x.test/a?api_key=real', KEY, false)).toBe('https://x.test/a?api_key=real');
    expect(fillKeyParams('https://x.test/a?token=', KEY, false)).toBe('https://x.test/a?token=');
    expect(fillKeyParams('https://x.test/a', KEY, false)).toBe('https://x.test/a');
    expect(fillKeyParams('https://x.test/a?api_key=', undefined, false)).toBe('https://x.test/a?api_key=');
  });

  it('fills `key` only for Gemini', () => {
    expect(fillKeyParams('https://x.test/a?key=', KEY, false)).toBe('https://x.test/a?key=');
    expect(fillKeyParams('https://x.test/a?key=', KEY, true)).toBe(`https://x.test/a?key=${ENC}`);
  });
});

describe('query helpers', () => {
  it('reads, removes and sets parameters', () => {
    expect(queryParam('https://x.test/?model=a%2Fb&x=1', 'model')).toBe('a/b');
    expect(queryParam('https://x.test/', 'model')).toBeUndefined();
    expect(removeQueryParam('https://x.test/p?model=m&x=1', 'model')).toBe('https://x.test/p?x=1');
    expect(removeQueryParam('https://x.test/p?model=m', 'model')).toBe('https://x.test/p');
    expect(setQueryParam('https://x.test/p?x=1', 'stream', 'true')).toBe('https://x.test/p?x=1&stream=true');
    expect(setQueryParam('https://x.test/p?stream=false&x=1&stream=0', 'stream', 'true')).toBe('https://x.test/p?stream=true&x=1');
  });
});

describe('resolveEndpoint', () => {
  it('OpenAI-compatible: completes base URLs, strips our model= and picks per-host defaults', () => {
    expect(resolveEndpoint('openai', 'https://api.openai.com', undefined, false)).toEqual({
      url: 'https://api.openai.com/v1/chat/completions',
      model: 'gpt-4o-mini',
    });
    expect(resolveEndpoint('openai', 'https://api.openai.com/v1?model=gpt-4.1', undefined, false)).toEqual({
      url: 'https://api.openai.com/v1/chat/completions',
      model: 'gpt-4.1',
    });
    expect(resolveEndpoint('openai', 'https://api.groq.com/openai/v1/chat/completions', undefined, true)).toEqual({
      url: 'https://api.groq.com/openai/v1/chat/completions',
      model: 'llama-3.1-8b-instant',
    });
    expect(resolveEndpoint('openai', 'http://localhost:11434/v1/chat/completions?model=llama3.2&x=1', undefined, false)).toEqual({
      url: 'http://localhost:11434/v1/chat/completions?x=1',
      model: 'llama3.2',
    });
  });

  it('Anthropic: completes base URLs, keeps proxy routes', () => {
    expect(resolveEndpoint('messages', 'https://api.anthropic.com', undefined, false)).toEqual({
      url: 'https://api.anthropic.com/v1/messages',
      model: 'claude-haiku-4-5',
    });
    expect(resolveEndpoint('messages', 'https://api.anthropic.com/v1/?model=claude-sonnet-4-5', undefined, false).url).toBe(
      'https://api.anthropic.com/v1/messages',
    );
    expect(resolveEndpoint('messages', 'https://gw.example/claude/chat', undefined, false).url).toBe('https://gw.example/claude/chat');
  });

  it('Gemini: the model lives in the path; streaming switches method and adds alt=sse', () => {
    const base = 'https://generativelanguage.googleapis.com';
    expect(resolveEndpoint('generation', `${base}/v1beta/models/gemini-2.0-flash:generateContent?key=`, 'K', false)).toEqual({
      url: `${base}/v1beta/models/gemini-2.0-flash:generateContent?key=K`,
      model: 'gemini-2.0-flash',
    });
    expect(resolveEndpoint('generation', `${base}/v1beta/models/gemini-2.0-flash:generateContent`, 'K', true).url).toBe(
      `${base}/v1beta/models/gemini-2.0-flash:streamGenerateContent?alt=sse`,
    );
    expect(resolveEndpoint('generation', base, undefined, false).url).toBe(`${base}/v1beta/models/gemini-2.5-flash:generateContent`);
    expect(resolveEndpoint('generation', `${base}/v1?model=gemini-2.5-pro`, undefined, true).url).toBe(
      `${base}/v1/models/gemini-2.5-pro:streamGenerateContent?alt=sse`,
    );
  });

  it('flow and generic URLs are kept (key filling apart); flow streams with ?stream=true', () => {
    expect(resolveEndpoint('flow', 'https://lf.example/api/v1/run/f?model=x', 'K', false).url).toBe('https://lf.example/api/v1/run/f?model=x');
    expect(resolveEndpoint('flow', 'https://lf.example/api/v1/run/f', 'K', true).url).toBe('https://lf.example/api/v1/run/f?stream=true');
    expect(resolveEndpoint('generic', 'https://g.example/chat?api_key=', 'K', false).url).toBe('https://g.example/chat?api_key=K');
  });
});
