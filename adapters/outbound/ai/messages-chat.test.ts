import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { createGuardedHttpClient } from '../http/guarded-client.ts';
import { createMessagesCompletion, messagesUrl, toMessagesBody } from './messages-chat.ts';

describe('messages format', () => {
  it('appends /v1/messages once and keeps a full URL', () => {
    expect(messagesUrl('https://api.example.com')).toBe('https://api.example.com/v1/messages');
    expect(messagesUrl('https://api.example.com/v1/')).toBe('https://api.example.com/v1/messages');
    expect(messagesUrl('https://gw.example.com/x/v1/messages?k=1')).toBe('https://gw.example.com/x/v1/messages?k=1');
  });

  it('puts the system prompt apart, alternates turns, and carries tool use and results as blocks', () => {
    const body = toMessagesBody({
      baseUrl: 'https://api.example.com',
      model: 'm',
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'Post hi' },
        {
          role: 'assistant',
          content: '',
          toolCalls: [
            { id: 't1', name: 'post', arguments: '{"text":"hi"}' },
            { id: 't2', name: 'post', arguments: 'not json' },
          ],
        },
        { role: 'tool', content: '{"ok":true}', toolCallId: 't1' },
        { role: 'tool', content: '{"error":"bad"}', toolCallId: 't2' },
      ],
      tools: [{ name: 'post', description: 'Posts', parameters: { type: 'object' } }],
    });
    expect(body).toEqual({
      model: 'm',
      max_tokens: 1024,
      system: 'Be brief.',
      tools: [{ name: 'post', description: 'Posts', input_schema: { type: 'object' } }],
      messages: [
        { role: 'user', content: [{ type: 'text', text: 'Post hi' }] },
        {
          role: 'assistant',
          content: [
            { type: 'tool_use', id: 't1', name: 'post', input: { text: 'hi' } },
            { type: 'tool_use', id: 't2', name: 'post', input: {} },
          ],
        },
        {
          role: 'user',
          content: [
            { type: 'tool_result', tool_use_id: 't1', content: '{"ok":true}' },
            { type: 'tool_result', tool_use_id: 't2', content: '{"error":"bad"}' },
          ],
        },
      ],
    });
  });
});

describe('a messages provider echoing its credentials in a successful reply', () => {
  it('redacts the key and a credential of the base URL from the text', async () => {
    // Echoes the x-api-key header and the request's query, as a debugging proxy would.
    const server = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        res.writeHead(200, { 'content-type': 'application/json' });
        const echo = `key ${String(req.headers['x-api-key'])}, url ${req.url}`;
        res.end(JSON.stringify({ content: [{ type: 'text', text: echo }], usage: { input_tokens: 3, output_tokens: 4 } }));
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const port = (server.address() as AddressInfo).port;
      const http = createGuardedHttpClient({ allowHosts: [`127.0.0.1:${port}`] });
      const reply = await createMessagesCompletion(http, {
        baseUrl: `http://127.0.0.1:${port}/v1?api_key=url-key-777777`,
        apiKey: 'sk-ant-secret-1',
        model: 'm',
        messages: [{ role: 'user', content: 'hi' }],
      });
      expect(reply.text).toBe('key [redacted], url /v1/messages?api_key=[redacted]');
    } finally {
      server.close();
    }
  });
});
