/** Upstream stream shapes the provider mock does not produce: fallbacks, error events, broken framing. */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createGuardedHttpClient, type GuardedHttpClient } from '../../http/guarded-client.ts';
import { streamEndpoint } from './connector.ts';
import { AiUpstreamError } from '../core/upstream-error.ts';
import type { ConnectorStreamEvent, EndpointType } from './types.ts';

let server: http.Server;
let base = '';
let client: GuardedHttpClient;
let reply: { contentType: string; chunks: string[] } = { contentType: 'text/event-stream', chunks: [] };

beforeAll(async () => {
  server = http.createServer((req, res) => {
    req.resume();
    req.on('end', async () => {
      res.writeHead(200, { 'content-type': reply.contentType });
      for (const chunk of reply.chunks) {
        res.write(chunk);
        await new Promise((resolve) => setTimeout(resolve, 2));
      }
      res.end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  base = `http://127.0.0.1:${port}`;
  client = createGuardedHttpClient({ allowHosts: [`127.0.0.1:${port}`] });
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});
beforeEach(() => {
  reply = { contentType: 'text/event-stream', chunks: [] };
});

async function run(type: EndpointType): Promise<ConnectorStreamEvent[]> {
  const events: ConnectorStreamEvent[] = [];
  for await (const event of streamEndpoint(client, { endpointUrl: `${base}/x`, type, apiKey: 'secret-key-123', message: 'm', sessionId: 's' }))
    events.push(event);
  return events;
}

async function runFailure(type: EndpointType): Promise<AiUpstreamError> {
  try {
    await run(type);
  } catch (err) {
    expect(err).toBeInstanceOf(AiUpstreamError);
    return err as AiUpstreamError;
  }
  throw new Error('expected a failure');
}

const langflowResult = (text: string) => ({ outputs: [{ outputs: [{ results: { message: { text } } }] }] });

describe('Langflow stream', () => {
  it('uses the end result when the flow streamed no tokens', async () => {
    reply.chunks = [
      `${JSON.stringify({ event: 'add_message', data: { sender: 'User', text: 'm' } })}\n\n`,
      `${JSON.stringify({ event: 'end', data: { result: langflowResult('whole answer') } })}\n\n`,
    ];
    const events = await run('flow');
    expect(events).toEqual([
      { type: 'delta', text: 'whole answer' },
      { type: 'done', reply: { type: 'flow', text: 'whole answer', status: 200, latencyMs: expect.any(Number), usage: null } },
    ]);
  });

  it('accepts data:-framed and newline-delimited events, with chunks split mid-line', () => {
    const token = (chunk: string) => JSON.stringify({ event: 'token', data: { chunk } });
    reply.chunks = [`data: ${token('a')}\n\n${token('b')}\n${token('c').slice(0, 10)}`, `${token('c').slice(10)}\r\n\r\n`];
    return expect(run('flow')).resolves.toMatchObject([{ text: 'a' }, { text: 'b' }, { text: 'c' }, { type: 'done', reply: { text: 'abc' } }]);
  });

  it('maps an error event to upstream_error', async () => {
    reply.chunks = [`${JSON.stringify({ event: 'error', data: { error: 'component OpenAIModel failed' } })}\n\n`];
    expect(await runFailure('flow')).toMatchObject({ kind: 'upstream_error', message: 'the external API reported an error: component OpenAIModel failed' });
  });

  it('maps a stream without any reply to invalid_response', async () => {
    reply.chunks = ['not json at all\n\n'];
    expect((await runFailure('flow')).kind).toBe('invalid_response');
    reply.chunks = [`${JSON.stringify({ event: 'end', data: { result: { outputs: [] } } })}\n\n`];
    expect((await runFailure('flow')).message).toMatch(/no recognised text field/);
  });
});

describe('SSE streams', () => {
  it('Anthropic error event → upstream_error', async () => {
    reply.chunks = [
      `event: message_start\ndata: ${JSON.stringify({ type: 'message_start', message: { usage: { input_tokens: 1, output_tokens: 0 } } })}\n\n`,
      `event: error\ndata: ${JSON.stringify({ type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } })}\n\n`,
    ];
    expect(await runFailure('messages')).toMatchObject({ kind: 'upstream_error', detail: 'Overloaded' });
  });

  it('OpenAI error chunk → upstream_error, non-JSON event → invalid_response, empty stream → invalid_response', async () => {
    reply.chunks = [`data: ${JSON.stringify({ error: { message: 'context length exceeded' } })}\n\n`];
    expect(await runFailure('openai')).toMatchObject({ kind: 'upstream_error', detail: 'context length exceeded' });
    reply.chunks = ['data: {broken\n\n'];
    expect(await runFailure('openai')).toMatchObject({
      kind: 'invalid_response',
      message: 'invalid response format: the external API sent a stream event that is not JSON',
    });
    reply.chunks = [': keep-alive\n\n'];
    expect(await runFailure('openai')).toMatchObject({ kind: 'invalid_response', message: 'invalid response format: the stream carried no reply events' });
  });

  it('Gemini stream split across chunks with CRLF framing', async () => {
    const event = (text: string) => `data: ${JSON.stringify({ candidates: [{ content: { parts: [{ text }], role: 'model' } }] })}\r\n\r\n`;
    const all = event('Hel') + event('lo');
    reply.chunks = [all.slice(0, 7), all.slice(7, all.length - 3), all.slice(all.length - 3)];
    const events = await run('generation');
    expect(events.filter((e) => e.type === 'delta').map((e) => (e as { text: string }).text)).toEqual(['Hel', 'lo']);
    expect(events.at(-1)).toMatchObject({ type: 'done', reply: { text: 'Hello', usage: null } });
  });

  it('a non-JSON body on a stream request → invalid_response', async () => {
    reply = { contentType: 'text/html', chunks: ['<html>hi</html>'] };
    for (const type of ['openai', 'messages', 'generation', 'flow'] as const) {
      expect(await runFailure(type)).toMatchObject({ kind: 'invalid_response', message: 'invalid response format: the external API did not return JSON' });
    }
  });
});

describe('a key the upstream echoes in its reply', () => {
  // run() sends this key; each stream splits it between two events.
  const KEY = 'secret-key-123';
  const [head, tail] = [KEY.slice(0, 5), KEY.slice(5)];
  const deltasOf = (events: ConnectorStreamEvent[]) => events.flatMap((e) => (e.type === 'delta' ? [e.text] : []));

  it.each([
    ['openai', (text: string) => `data: ${JSON.stringify({ choices: [{ delta: { content: text } }] })}\n\n`, 'data: [DONE]\n\n'],
    [
      'messages',
      (text: string) => `event: content_block_delta\ndata: ${JSON.stringify({ type: 'content_block_delta', delta: { type: 'text_delta', text } })}\n\n`,
      '',
    ],
    ['generation', (text: string) => `data: ${JSON.stringify({ candidates: [{ content: { parts: [{ text }], role: 'model' } }] })}\n\n`, ''],
    ['flow', (text: string) => `${JSON.stringify({ event: 'token', data: { chunk: text } })}\n\n`, ''],
  ] as const)('is redacted from the %s deltas and the reply, split across two events', async (type, event, last) => {
    reply.chunks = [event(`your key is ${head}`), event(`${tail} ok`), last];
    const events = await run(type);
    expect(deltasOf(events).join('')).toBe('your key is [redacted] ok');
    for (const delta of deltasOf(events)) expect(delta).not.toContain(head);
    expect(events.at(-1)).toMatchObject({ type: 'done', reply: { text: 'your key is [redacted] ok' } });
  });

  it('is redacted from a flow reply that comes whole at the end', async () => {
    reply.chunks = [`${JSON.stringify({ event: 'end', data: { result: langflowResult(`key ${KEY}`) } })}\n\n`];
    expect(await run('flow')).toEqual([
      { type: 'delta', text: 'key [redacted]' },
      { type: 'done', reply: expect.objectContaining({ text: 'key [redacted]' }) },
    ]);
  });

  it('is redacted from a reply the upstream sent as one JSON document on a stream request', async () => {
    reply = { contentType: 'application/json', chunks: [JSON.stringify({ choices: [{ message: { content: `key ${KEY}` } }] })] };
    expect(deltasOf(await run('openai'))).toEqual(['key [redacted]']);
  });
});
