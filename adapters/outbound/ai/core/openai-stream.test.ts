import { describe, expect, it } from 'vitest';
import { OPENAI_STREAM_DONE, readOpenAiStreamChunk } from './openai-stream.ts';

const excerpt = (text: string) => `<${text}>`;
const read = (data: unknown) => readOpenAiStreamChunk(data, 'endpoint', excerpt);

describe('readOpenAiStreamChunk', () => {
  it('reads the delta, a whole message instead, the usage chunk and the end marker', () => {
    expect(read({ choices: [{ delta: { content: 'Hel' } }] })).toEqual({ kind: 'chunk', text: 'Hel', usage: null });
    expect(read({ choices: [{ message: { content: 'Hello' } }] })).toEqual({ kind: 'chunk', text: 'Hello', usage: null });
    expect(read({ choices: [], usage: { prompt_tokens: 3, completion_tokens: 2 } })).toEqual({
      kind: 'chunk',
      text: null,
      usage: { promptTokens: 3, completionTokens: 2, totalTokens: 5 },
    });
    expect(read({ choices: [{ delta: { content: '' } }] })).toEqual({ kind: 'chunk', text: null, usage: null });
    expect(read(OPENAI_STREAM_DONE)).toEqual({ kind: 'done' });
    expect(read(42)).toEqual({ kind: 'other' });
  });

  it("throws the caller's error for an error event, with only the excerpt of what the provider said", () => {
    expect(() => read({ error: { message: 'overloaded' } })).toThrow(
      expect.objectContaining({ source: 'endpoint', kind: 'upstream_error', message: 'the external API reported an error: <overloaded>' }),
    );
    expect(() => readOpenAiStreamChunk({ error: 'quota' }, 'language_model', excerpt)).toThrow('the language-model provider reported an error: <quota>');
  });

  it('takes a chunk with choices as an answer even when it also names an error', () => {
    expect(read({ choices: [{ delta: { content: 'ok' } }], error: 'ignored' })).toEqual({ kind: 'chunk', text: 'ok', usage: null });
  });
});
