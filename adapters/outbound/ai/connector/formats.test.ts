import { describe, expect, it } from 'vitest';
import { buildBody, buildHeaders, extractReply } from './formats.ts';
import { AiUpstreamError } from '../core/upstream-error.ts';
import type { EndpointType } from './types.ts';

const excerpt = (text: string): string => text.slice(0, 200);

function fails(type: EndpointType, parsed: unknown): AiUpstreamError {
  try {
    extractReply(type, parsed, excerpt);
  } catch (err) {
    expect(err).toBeInstanceOf(AiUpstreamError);
    return err as AiUpstreamError;
  }
  throw new Error('expected a failure');
}

const flow = (entry: unknown) => ({ session_id: 's', outputs: [{ inputs: {}, outputs: [entry] }] });

describe('extractReply', () => {
  it('flow: results.message.text, then artifacts.message, then the other Langflow paths', () => {
    expect(extractReply('flow', flow({ results: { message: { text: 'A' } }, artifacts: { message: 'B' } }), excerpt).text).toBe('A');
    expect(extractReply('flow', flow({ results: {}, artifacts: { message: 'B' } }), excerpt).text).toBe('B');
    expect(extractReply('flow', flow({ results: { message: { data: { text: 'C' } } } }), excerpt).text).toBe('C');
    expect(extractReply('flow', flow({ outputs: { message: { message: 'D', type: 'text' } } }), excerpt).text).toBe('D');
    expect(extractReply('flow', flow({ messages: [{ message: 'E' }] }), excerpt).text).toBe('E');
    expect(extractReply('flow', { outputs: [{ outputs: [{ results: {} }, { results: { message: { text: 'F' } } }] }] }, excerpt).text).toBe('F');
    expect(fails('flow', flow({ results: { message: { text: 42 } } })).message).toBe(
      'invalid response format: the reply has no recognised text field (expected outputs[0].outputs[0].results.message.text)',
    );
    expect(fails('flow', { detail: 'Flow not found' })).toMatchObject({
      kind: 'upstream_error',
      message: 'the external API reported an error: Flow not found',
    });
  });

  it('flow: finds the text past an outputs list of hundreds of thousands of entries, in a later run too', () => {
    const filler = Array.from({ length: 300_000 }, () => 0);
    const reply = { outputs: [{ outputs: filler }, { outputs: [...filler.slice(0, 10), { results: { message: { text: 'G' } } }] }] };
    expect(extractReply('flow', reply, excerpt).text).toBe('G');
  });

  it('openai: choices[0].message.content (string or parts) and usage', () => {
    expect(extractReply('openai', { choices: [{ message: { content: 'hi' } }], usage: { prompt_tokens: 1, completion_tokens: 2 } }, excerpt)).toEqual({
      text: 'hi',
      usage: { promptTokens: 1, completionTokens: 2, totalTokens: 3 },
    });
    expect(
      extractReply(
        'openai',
        {
          choices: [
            {
              message: {
                content: [
                  { type: 'text', text: 'a' },
                  { type: 'text', text: 'b' },
                ],
              },
            },
          ],
        },
        excerpt,
      ),
    ).toEqual({ text: 'ab', usage: null });
    expect(fails('openai', { choices: [{ message: { content: null, tool_calls: [] } }] }).kind).toBe('invalid_response');
    expect(fails('openai', { error: { message: 'model overloaded' } })).toMatchObject({ kind: 'upstream_error', detail: 'model overloaded' });
  });

  it('messages: concatenates the text blocks', () => {
    const parsed = {
      content: [
        { type: 'text', text: 'one ' },
        { type: 'tool_use', id: 't' },
        { type: 'text', text: 'two' },
      ],
      usage: { input_tokens: 5, output_tokens: 2 },
    };
    expect(extractReply('messages', parsed, excerpt)).toEqual({ text: 'one two', usage: { promptTokens: 5, completionTokens: 2, totalTokens: 7 } });
    expect(fails('messages', { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } })).toMatchObject({
      kind: 'upstream_error',
      detail: 'Overloaded',
    });
  });

  it('generation: concatenates candidates[0].content.parts[].text, skipping thoughts', () => {
    const parsed = {
      candidates: [{ content: { parts: [{ text: 'thinking…', thought: true }, { text: 'x' }, { text: 'y' }] } }],
      usageMetadata: { promptTokenCount: 1, candidatesTokenCount: 1, totalTokenCount: 9 },
    };
    expect(extractReply('generation', parsed, excerpt)).toEqual({ text: 'xy', usage: { promptTokens: 1, completionTokens: 1, totalTokens: 9 } });
    expect(fails('generation', { promptFeedback: { blockReason: 'SAFETY' } })).toMatchObject({
      kind: 'upstream_error',
      message: 'the external API reported an error: the message was blocked (SAFETY)',
    });
  });

  it('generic: the first present of response, output, text, message, result', () => {
    expect(extractReply('generic', { result: 'r', message: 'm', text: 't', output: 'o', response: 'p' }, excerpt).text).toBe('p');
    expect(extractReply('generic', { result: 'r', message: 'm', text: 't', output: 'o' }, excerpt).text).toBe('o');
    expect(extractReply('generic', { result: 'r', message: 'm', text: 't' }, excerpt).text).toBe('t');
    expect(extractReply('generic', { result: 'r', message: 'm' }, excerpt).text).toBe('m');
    expect(extractReply('generic', { result: 'r' }, excerpt).text).toBe('r');
    expect(extractReply('generic', { message: { content: 'nested' } }, excerpt).text).toBe('nested');
    expect(extractReply('generic', { response: '<script>alert(1)</script>' }, excerpt).text).toBe('<script>alert(1)</script>');
    expect(fails('generic', { answer: 'x' }).message).toBe(
      'invalid response format: the reply has no recognised text field (expected one of response, output, text, message, result)',
    );
    expect(fails('generic', [1, 2]).kind).toBe('invalid_response');
    expect(fails('generic', { error: 'quota exceeded' })).toMatchObject({ kind: 'upstream_error', detail: 'quota exceeded' });
  });
});

describe('buildHeaders', () => {
  it('sends the key in the headers of each type, and nothing without a key', () => {
    expect(buildHeaders('flow', 'K', false)).toEqual({
      'content-type': 'application/json',
      accept: 'application/json',
      authorization: 'Bearer K',
      'x-api-key': 'K',
    });
    expect(buildHeaders('openai', 'K', false)).toEqual({ 'content-type': 'application/json', accept: 'application/json', authorization: 'Bearer K' });
    expect(buildHeaders('messages', 'K', false)).toEqual({
      'content-type': 'application/json',
      accept: 'application/json',
      'anthropic-version': '2023-06-01',
      'x-api-key': 'K',
      authorization: 'Bearer K',
    });
    expect(buildHeaders('generation', 'K', false)).toEqual({ 'content-type': 'application/json', accept: 'application/json', 'x-goog-api-key': 'K' });
    expect(buildHeaders('generic', 'K', false)).toEqual({
      'content-type': 'application/json',
      accept: 'application/json',
      'x-api-key': 'K',
      authorization: 'Bearer K',
    });
    expect(buildHeaders('openai', undefined, false)).toEqual({ 'content-type': 'application/json', accept: 'application/json' });
  });
});

describe('buildBody', () => {
  const req = { endpointUrl: '', message: 'now', sessionId: 'S', history: [{ role: 'user' as const, content: 'before' }] };
  it('gives flow and generic only the current message and the session', () => {
    expect(buildBody('flow', req, '', false, '')).toEqual({ input_value: 'now', output_type: 'chat', input_type: 'chat', session_id: 'S' });
    expect(buildBody('generic', req, '', false, '')).toEqual({ message: 'now', session_id: 'S' });
  });
  it('merges consecutive user turns for Gemini', () => {
    expect(buildBody('generation', req, 'g', false, '')).toMatchObject({ contents: [{ role: 'user', parts: [{ text: 'before\n\nnow' }] }] });
  });
  it('leaves stream_options out for Mistral', () => {
    expect(buildBody('openai', req, 'm', true, 'api.mistral.ai')).not.toHaveProperty('stream_options');
    expect(buildBody('openai', req, 'm', true, 'api.openai.com')).toMatchObject({ stream: true, stream_options: { include_usage: true } });
  });
});
