import { randomUUID } from 'node:crypto';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jsonRequestServer } from '../helpers/provider-mock-servers.ts';
import { startSlackServer, type ProviderServer } from '../helpers/provider-servers.ts';
import { jsonb } from '../../db/json.ts';
import { startTestApp, type TestApp } from '../helpers/test-app.ts';

/**
 * Tools in chat: a knowledge base whose language model (an OpenAI-compatible server in this test, answering with
 * native `tool_calls`) is offered the owner's enabled Slack tool and the built-in lead capture; a visitor's
 * message makes the model call them; each call, its arguments and its result or error are in `toolCalls` and the
 * history; the provider (a local Slack) received the real request.
 */

type Reply = { toolCalls?: Array<{ name: string; arguments: unknown }>; text?: string };
let model: Server;
let modelUrl: string;
/** What the model answers next, in order; with none left it answers in text. */
const script: Reply[] = [];
const seen: Array<{
  tools: Array<{ function: { name: string } }> | undefined;
  messages: Array<{ role: string; content: string | null; tool_call_id?: string }>;
}> = [];
const messagesSeen: Array<{
  headers: Record<string, unknown>;
  body: { tools?: Array<{ name: string; input_schema: unknown }>; messages: Array<{ role: string; content: unknown }>; system?: string };
}> = [];
let slack: ProviderServer;
let app: TestApp;
let owner: { token: string; ownerId: string };
let other: { token: string; ownerId: string };
let configId: string;
let slug: string;
let accountId: string;

async function startModel() {
  model = jsonRequestServer((req, request, res) => {
    if (req.url === '/v1/messages') {
      // The messages format: tool_use blocks out, tool_result blocks back in a user turn.
      messagesSeen.push({ headers: req.headers, body: request });
      const next = request.tools?.length ? script.shift() : undefined;
      const content = next?.toolCalls
        ? next.toolCalls.map((c, i) => ({ type: 'tool_use', id: `toolu_${messagesSeen.length}_${i}`, name: c.name, input: c.arguments }))
        : [{ type: 'text', text: next?.text ?? 'Posted, messages-style.' }];
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          id: 'msg',
          type: 'message',
          role: 'assistant',
          model: 'claude-like',
          content,
          stop_reason: next?.toolCalls ? 'tool_use' : 'end_turn',
          usage: { input_tokens: 12, output_tokens: 6 },
        }),
      );
      return;
    }
    seen.push({ tools: request.tools, messages: request.messages });
    const next = request.tools?.length ? script.shift() : undefined;
    const message = next?.toolCalls
      ? {
          role: 'assistant',
          content: null,
          tool_calls: next.toolCalls.map((c, i) => ({
            id: `call_${seen.length}_${i}`,
            type: 'function',
            function: { name: c.name, arguments: JSON.stringify(c.arguments) },
          })),
        }
      : { role: 'assistant', content: next?.text ?? 'Done: I posted it.' };
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(
      JSON.stringify({
        id: 'cmpl',
        model: 'tool-model',
        choices: [{ index: 0, message, finish_reason: next?.toolCalls ? 'tool_calls' : 'stop' }],
        usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 },
      }),
    );
  });
  await new Promise<void>((resolve) => model.listen(0, '127.0.0.1', resolve));
  modelUrl = `http://127.0.0.1:${(model.address() as AddressInfo).port}`;
}

async function visitorChat(message: string, sessionId?: string) {
  const session = await app.request('POST', `/api/v1/chat/${slug}/visitor-sessions`, { body: {} });
  const res = await app.request('POST', `/api/v1/chat/${slug}/visitor-messages`, {
    token: session.body.data.token,
    body: sessionId ? { message, sessionId } : { message },
  });
  expect(res.status, res.text).toBe(200);
  return { body: res.body, token: session.body.data.token as string };
}

beforeAll(async () => {
  await startModel();
  slack = await startSlackServer();
  slack.validTokens.add('xoxb-valid');
  app = await startTestApp({
    TOOLHUB_PROVIDER_URLS: `slack.api=${slack.url}`,
    OUTBOUND_ALLOW_HOSTS: [new URL(modelUrl).host, slack.hostPort].join(','),
    RATE_LIMIT_DEFAULT: '10000',
    RATE_LIMIT_CHAT: '10000',
  });
  owner = await app.signUp('toolchat');
  other = await app.signUp('toolchat-other');
  const kb = await app.request('POST', '/api/v1/knowledge-base/configs', {
    token: owner.token,
    body: { name: 'Ops', llm: { provider: 'openai', baseUrl: modelUrl, model: 'tool-model' } },
  });
  expect(kb.status, kb.text).toBe(201);
  configId = kb.body.data.config.id;
  await app.request('PATCH', `/api/v1/knowledge-base/configs/${configId}/tools`, {
    token: owner.token,
    body: { tools: [{ name: 'lead_capture', enabled: true }] },
  });
  const iface = await app.request('POST', '/api/v1/chat-interfaces', { token: owner.token, body: { name: 'Ops chat', configId, public: true } });
  slug = iface.body.data.chatInterface.slug;
  // The account as the OAuth flow leaves it (that flow is tested in toolhub.test.ts).
  accountId = randomUUID();
  await app.deps.database.db
    .insertInto('toolhub_accounts')
    .values({
      id: accountId,
      owner_id: owner.ownerId,
      toolkit: 'slack',
      auth_config_id: null,
      label: 'Team',
      status: 'ACTIVE',
      status_reason: null,
      settings: jsonb({}),
      scopes: jsonb([]),
      access_token_enc: app.deps.secrets.seal('xoxb-valid'),
      token_expires_at: null,
    })
    .execute();
});
afterAll(async () => {
  await app?.stop();
  await slack?.close();
  model?.close();
});

describe('tools in chat', () => {
  it('enabling tools is checked: another owner’s knowledge base or account, an unknown tool', async () => {
    const bad = await app.request('PUT', '/api/v1/toolhub/enabled-tools', {
      token: owner.token,
      body: { configId, tools: [{ accountId, tool: 'delete_workspace' }] },
    });
    expect(bad.status).toBe(400);
    expect(bad.body.error.details).toContain('tools.0.tool');
    const foreign = await app.request('PUT', '/api/v1/toolhub/enabled-tools', { token: other.token, body: { configId, tools: [] } });
    expect(foreign.status).toBe(404);
    const otherKb = (await app.request('POST', '/api/v1/knowledge-base/configs', { token: other.token, body: {} })).body.data.config.id;
    const stolen = await app.request('PUT', '/api/v1/toolhub/enabled-tools', {
      token: other.token,
      body: { configId: otherKb, tools: [{ accountId, tool: 'post_message' }] },
    });
    expect(stolen.status).toBe(400);
    expect(stolen.body.error.details).toContain('tools.0.accountId');
    const ok = await app.request('PUT', '/api/v1/toolhub/enabled-tools', {
      token: owner.token,
      body: { configId, tools: [{ accountId, tool: 'post_message' }] },
    });
    expect(ok.status, ok.text).toBe(200);
    expect(ok.body.data.tools).toEqual([{ configId, accountId, toolkit: 'slack', tool: 'post_message', name: 'slack__post_message', accountStatus: 'ACTIVE' }]);
    expect((await app.request('GET', '/api/v1/toolhub/enabled-tools', { token: other.token })).body.data.tools).toEqual([]);
    // Filtering by a knowledge base answers like PUT does: another owner's, an unknown or a malformed id is a 404.
    for (const id of [configId, '7a1b2c3d-0000-4000-8000-000000000000', 'not-an-id']) {
      const foreignList = await app.request('GET', `/api/v1/toolhub/enabled-tools?configId=${id}`, { token: other.token });
      expect(foreignList.status, id).toBe(404);
      expect(foreignList.body.error.message).toBe('Knowledge base not found');
    }
    const ownList = await app.request('GET', `/api/v1/toolhub/enabled-tools?configId=${configId}`, { token: owner.token });
    expect(ownList.status, ownList.text).toBe(200);
    expect(ownList.body.data.tools).toEqual(ok.body.data.tools);
    expect((await app.request('GET', `/api/v1/toolhub/enabled-tools?configId=${otherKb}`, { token: other.token })).body.data.tools).toEqual([]);
    const config = await app.request('GET', '/api/v1/toolhub/config', { token: owner.token });
    expect(config.body.data.toolkits.find((t: { slug: string }) => t.slug === 'slack').enabledTools).toEqual([{ configId, accountId, tool: 'post_message' }]);
  });

  it('the model calls the Slack tool; the call, its result and the reply are in toolCalls and the history', async () => {
    script.push({ toolCalls: [{ name: 'slack__post_message', arguments: { channel: '#general', text: 'A visitor says hello' } }] });
    const before = slack.requests.length;
    const { body, token } = await visitorChat('Please tell the team I said hello');
    expect(body.message).toBe('Done: I posted it.');
    expect(body.toolCalls).toEqual([
      {
        name: 'slack__post_message',
        arguments: { channel: '#general', text: 'A visitor says hello' },
        result: expect.objectContaining({ channel: expect.any(String), ts: expect.any(String) }),
      },
    ]);
    const posted = slack.requests.slice(before).find((r) => r.path.endsWith('/chat.postMessage'))!;
    expect(posted.headers.authorization).toBe('Bearer xoxb-valid');
    expect(posted.body).toMatchObject({ channel: '#general', text: 'A visitor says hello' });
    // The model was offered both tools, and got the result back as a tool message.
    const offered = seen
      .at(-2)!
      .tools!.map((t) => t.function.name)
      .sort();
    expect(offered).toEqual(['lead_capture', 'slack__post_message']);
    expect(seen.at(-1)!.messages.at(-1)).toMatchObject({ role: 'tool', tool_call_id: expect.stringMatching(/^call_/) });

    const history = await app.request('GET', `/api/v1/chat/${slug}/visitor-history?sessionId=${body.sessionId}`, { token });
    expect(history.body.data.messages.at(-1).toolCalls[0]).toMatchObject({ name: 'slack__post_message', result: { channel: expect.any(String) } });
    const debug = await app.request('GET', '/api/v1/toolhub/debug-accounts', { token: owner.token });
    expect(debug.body.data.accounts[0].lastUsedAt).not.toBeNull();
  });

  it('a failing call and bad arguments come back to the model as errors, and show in toolCalls', async () => {
    script.push({
      toolCalls: [
        { name: 'slack__post_message', arguments: { channel: '#nope', text: 'x' } },
        { name: 'slack__post_message', arguments: { text: 'no channel' } },
        { name: 'shell__rm', arguments: {} },
      ],
    });
    const { body } = await visitorChat('Post it to the nope channel');
    expect(body.toolCalls).toEqual([
      { name: 'slack__post_message', arguments: { channel: '#nope', text: 'x' }, error: expect.stringMatching(/channel_not_found/) },
      { name: 'slack__post_message', arguments: { text: 'no channel' }, error: expect.stringMatching(/Invalid arguments/) },
      { name: 'shell__rm', arguments: {}, error: 'There is no tool named shell__rm' },
    ]);
    const toolMessages = seen.at(-1)!.messages.filter((m) => m.role === 'tool');
    expect(toolMessages).toHaveLength(3);
    expect(toolMessages[0]!.content).toContain('channel_not_found');
  });

  it('lead capture is a tool too: the model calls it and the widget gets the form', async () => {
    script.push({ toolCalls: [{ name: 'lead_capture', arguments: { reason: 'wants a call' } }] }, { text: 'Please leave your details in the form.' });
    const { body } = await visitorChat('Can someone call me?');
    expect(body.toolCalls[0]).toMatchObject({ name: 'lead_capture', result: { shown: true } });
    expect(body.formConfig).toMatchObject({ tool: 'lead_capture', fields: expect.any(Array) });
  });

  it('at most eight calls run per model turn; the rest are refused without running', async () => {
    script.push({ toolCalls: Array.from({ length: 30 }, (_, i) => ({ name: 'slack__post_message', arguments: { channel: '#general', text: `fan ${i}` } })) });
    const before = slack.requests.filter((r) => r.path.endsWith('/chat.postMessage')).length;
    const { body } = await visitorChat('Post thirty times');
    expect(slack.requests.filter((r) => r.path.endsWith('/chat.postMessage')).length - before).toBe(8);
    expect(body.toolCalls).toHaveLength(9);
    expect(body.toolCalls[8]).toMatchObject({ error: '22 more calls were not run' });
    // The model got an answer for every call it made.
    expect(seen.at(-1)!.messages.filter((m) => m.role === 'tool')).toHaveLength(30);
  });

  it('a model that keeps calling tools is stopped after four rounds and answers without them', async () => {
    for (let i = 0; i < 6; i++) script.push({ toolCalls: [{ name: 'slack__post_message', arguments: { channel: '#general', text: `loop ${i}` } }] });
    const requestsBefore = seen.length;
    const { body } = await visitorChat('Spam the channel');
    expect(body.toolCalls).toHaveLength(4);
    expect(seen.length - requestsBefore).toBe(5);
    expect(seen.at(-1)!.tools).toBeUndefined();
    script.length = 0;
  });

  it('a messages-style model calls the same tool with tool_use, and gets tool_result back', async () => {
    const kb = await app.request('POST', '/api/v1/knowledge-base/configs', {
      token: owner.token,
      body: { name: 'Ops (messages)', llm: { provider: 'messages', baseUrl: modelUrl, model: 'claude-like', apiKey: 'sk-msg' } },
    });
    expect(kb.status, kb.text).toBe(201);
    expect(kb.body.data.config.llm).toMatchObject({ provider: 'messages', hasApiKey: true });
    const messagesKb = kb.body.data.config.id;
    await app.request('PUT', '/api/v1/toolhub/enabled-tools', {
      token: owner.token,
      body: { configId: messagesKb, tools: [{ accountId, tool: 'post_message' }] },
    });
    const iface = await app.request('POST', '/api/v1/chat-interfaces', {
      token: owner.token,
      body: { name: 'Ops chat 2', configId: messagesKb, public: true },
    });
    const messagesSlug = iface.body.data.chatInterface.slug;
    script.push({ toolCalls: [{ name: 'slack__post_message', arguments: { channel: '#general', text: 'from messages' } }] });
    const session = await app.request('POST', `/api/v1/chat/${messagesSlug}/visitor-sessions`, { body: {} });
    const res = await app.request('POST', `/api/v1/chat/${messagesSlug}/visitor-messages`, {
      token: session.body.data.token,
      body: { message: 'Say hi to the team' },
    });
    expect(res.status, res.text).toBe(200);
    expect(res.body.message).toBe('Posted, messages-style.');
    expect(res.body.toolCalls).toEqual([
      { name: 'slack__post_message', arguments: { channel: '#general', text: 'from messages' }, result: expect.objectContaining({ ts: expect.any(String) }) },
    ]);
    const [first, second] = messagesSeen.slice(-2);
    expect(first!.headers['x-api-key']).toBe('sk-msg');
    expect(first!.headers['anthropic-version']).toBe('2023-06-01');
    expect(first!.body.tools!.map((t) => t.name)).toEqual(['slack__post_message']);
    expect(typeof first!.body.system).toBe('string');
    expect(second!.body.messages.at(-2)).toMatchObject({ role: 'assistant', content: [{ type: 'tool_use', name: 'slack__post_message' }] });
    expect(second!.body.messages.at(-1)).toMatchObject({ role: 'user', content: [{ type: 'tool_result', tool_use_id: expect.stringMatching(/^toolu_/) }] });
  });

  it('a token the provider no longer accepts makes the account REVOKED, and it is not offered again', async () => {
    slack.validTokens.delete('xoxb-valid');
    script.push({ toolCalls: [{ name: 'slack__post_message', arguments: { channel: '#general', text: 'anyone?' } }] });
    const { body } = await visitorChat('Tell the team hello again');
    expect(body.toolCalls[0]).toMatchObject({ name: 'slack__post_message', error: expect.stringMatching(/invalid_auth/) });
    const account = await app.request('GET', `/api/v1/toolhub/accounts/${accountId}`, { token: owner.token });
    expect(account.body.data.account).toMatchObject({ status: 'REVOKED', statusReason: expect.stringMatching(/invalid_auth/) });
    await visitorChat('And once more');
    expect(seen.at(-1)!.tools!.map((t) => t.function.name)).toEqual(['lead_capture']);
    // Reconnected (a new token) and activated, it is offered again.
    slack.validTokens.add('xoxb-valid');
    const activated = await app.request('POST', `/api/v1/toolhub/accounts/${accountId}/activate`, { token: owner.token });
    expect(activated.body.data.account.status).toBe('ACTIVE');
  });

  it('a disabled account’s tools are not offered', async () => {
    await app.request('POST', `/api/v1/toolhub/accounts/${accountId}/disable`, { token: owner.token });
    const { body } = await visitorChat('Tell the team hello');
    expect(body.toolCalls).toEqual([]);
    expect(seen.at(-1)!.tools!.map((t) => t.function.name)).toEqual(['lead_capture']);
  });
});
