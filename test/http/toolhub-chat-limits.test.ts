import { randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jsonb } from '../../db/json.ts';
import { jsonRequestServer } from '../helpers/provider-mock-servers.ts';
import { startTestApp, type TestApp } from '../helpers/test-app.ts';

/**
 * What bounds a chat turn with tools: one deadline for the whole answer (twice OUTBOUND_TIMEOUT_MS, 1.2 s here),
 * however many rounds and calls the model asks for and however slow the tools; and an owner's input schema stored
 * with a forbidden keyword (from before the keyword check was complete) is never compiled and run.
 */

const OUTBOUND_TIMEOUT_MS = 600;
/** What the model asks for whenever it is offered tools; with none offered it answers in text. */
let calls: Array<{ name: string; arguments: unknown }> = [];
const offeredTools: number[] = [];
const offeredNames: string[][] = [];
/** How long the model takes to answer each request offered tools, in order (none left: at once). */
let modelDelays: number[] = [];
let model: Server;
let slowTool: Server;
const slowTimers = new Set<NodeJS.Timeout>();
let app: TestApp;
let owner: { token: string; ownerId: string };
let slug: string;
let configId: string;
let toolUrl: string;

function listen(server: Server): Promise<string> {
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(`http://127.0.0.1:${(server.address() as AddressInfo).port}`)));
}

async function addHttpTool(url: string, inputSchema: Record<string, unknown>) {
  const accountId = randomUUID();
  // Stored as it is, as an older release may have stored it (the connect route's checks are tested in toolhub.test.ts).
  await app.deps.database.db
    .insertInto('toolhub_accounts')
    .values({
      id: accountId,
      owner_id: owner.ownerId,
      toolkit: 'http',
      auth_config_id: null,
      label: null,
      status: 'ACTIVE',
      status_reason: null,
      settings: jsonb({ url, method: 'POST', inputSchema, description: 'Looks things up' }),
      scopes: jsonb([]),
      access_token_enc: null,
      token_expires_at: null,
    })
    .execute();
  return accountId;
}

async function enable(accountIds: string[]) {
  const res = await app.request('PUT', '/api/v1/toolhub/enabled-tools', {
    token: owner.token,
    body: { configId, tools: accountIds.map((accountId) => ({ accountId, tool: 'call' })) },
  });
  expect(res.status, res.text).toBe(200);
  return res.body.data.tools.map((t: { name: string }) => t.name) as string[];
}

async function visitorChat(message: string) {
  const session = await app.request('POST', `/api/v1/chat/${slug}/visitor-sessions`, { body: {} });
  expect(session.status, session.text).toBe(201);
  const started = Date.now();
  const res = await app.request('POST', `/api/v1/chat/${slug}/visitor-messages`, { token: session.body.data.token, body: { message } });
  return { res, elapsed: Date.now() - started };
}

beforeAll(async () => {
  model = jsonRequestServer((_req, request, res) => {
    offeredTools.push(request.tools?.length ?? 0);
    offeredNames.push((request.tools ?? []).map((t: { function: { name: string } }) => t.function.name));
    const message =
      request.tools?.length && calls.length > 0
        ? {
            role: 'assistant',
            content: null,
            tool_calls: calls.map((c, i) => ({
              id: `call_${offeredTools.length}_${i}`,
              type: 'function',
              function: { name: c.name, arguments: JSON.stringify(c.arguments) },
            })),
          }
        : { role: 'assistant', content: 'Here is what I found.' };
    const answer = () => {
      if (res.destroyed) return;
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          id: 'c',
          model: 'm',
          choices: [{ index: 0, message, finish_reason: 'stop' }],
          usage: { prompt_tokens: 5, completion_tokens: 5, total_tokens: 10 },
        }),
      );
    };
    const delay = request.tools?.length ? (modelDelays.shift() ?? 0) : 0;
    if (delay === 0) return answer();
    const timer = setTimeout(() => {
      slowTimers.delete(timer);
      answer();
    }, delay);
    slowTimers.add(timer);
  });
  // A tool that takes 5 s to answer (far longer than the whole answer may take), or 50 ms at /fast.
  slowTool = createServer((req, res) => {
    req.resume();
    const timer = setTimeout(
      () => {
        slowTimers.delete(timer);
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('{"found":true}');
      },
      req.url === '/fast' ? 50 : 5_000,
    );
    slowTimers.add(timer);
  });
  const [modelUrl, slowToolUrl] = await Promise.all([listen(model), listen(slowTool)]);
  toolUrl = slowToolUrl!;
  app = await startTestApp({
    OUTBOUND_ALLOW_HOSTS: [new URL(modelUrl).host, new URL(toolUrl).host].join(','),
    OUTBOUND_TIMEOUT_MS: String(OUTBOUND_TIMEOUT_MS),
    RATE_LIMIT_CHAT: '10000',
  });
  owner = await app.signUp('tool-limits');
  const kb = await app.request('POST', '/api/v1/knowledge-base/configs', {
    token: owner.token,
    body: { name: 'Tools', llm: { provider: 'openai', baseUrl: modelUrl, model: 'm' } },
  });
  expect(kb.status, kb.text).toBe(201);
  configId = kb.body.data.config.id;
  const iface = await app.request('POST', '/api/v1/chat-interfaces', { token: owner.token, body: { name: 'Tools chat', configId, public: true } });
  expect(iface.status, iface.text).toBe(201);
  slug = iface.body.data.chatInterface.slug;
});
afterAll(async () => {
  await app?.stop();
  for (const timer of slowTimers) clearTimeout(timer);
  slowTool?.closeAllConnections();
  slowTool?.close();
  model?.close();
});

describe('a chat turn with tools', () => {
  it('ends within twice the outbound timeout, however many slow calls the model asks for', async () => {
    const [name] = await enable([await addHttpTool(`${toolUrl}/lookup`, { type: 'object', properties: { q: { type: 'string' } } })]);
    calls = Array.from({ length: 8 }, (_, i) => ({ name: name!, arguments: { q: `question ${i}` } }));
    const before = offeredTools.length;
    const { res, elapsed } = await visitorChat('Look everything up');
    expect(res.status, res.text).toBe(200);
    expect(res.body.message).toBe('Here is what I found.');
    // 8 calls of 5 s each, four rounds, would be minutes; the whole answer gets 2 x 600 ms (plus the request's own work).
    expect(elapsed).toBeLessThan(2 * OUTBOUND_TIMEOUT_MS + 4_000);
    const errors = (res.body.toolCalls as Array<{ error?: string }>).map((c) => c.error);
    // The first calls time out with what was left of the tools' window; the rest are not run once it is spent.
    expect(errors[0]).toMatch(/^The tool did not answer within \d+(\.\d)? s$|^Not run: the time for tools in this answer is spent$/);
    expect(errors.at(-1)).toBe('Not run: the time for tools in this answer is spent');
    // The last model call was offered no tools: it answered in text.
    expect(offeredTools.slice(before).at(-1)).toBe(0);
  });

  it('a stored input schema with a pattern hidden under a property named `properties` is not run', async () => {
    const hidden = { type: 'object', properties: { properties: { type: 'string', pattern: '^(a+)+$' } } };
    const names = await enable([await addHttpTool(`${toolUrl}/redos`, hidden)]);
    // Compiled and run, the pattern's time doubles with each 'a' (seconds at 30, hours at 45); 20 keep this test alive either way.
    calls = [{ name: names[0]!, arguments: { properties: `${'a'.repeat(20)}!` } }];
    const { res } = await visitorChat('Check this');
    expect(res.status, res.text).toBe(200);
    expect(res.body.toolCalls[0].error).toBe(
      "The tool's input schema uses inputSchema.properties.properties.pattern, which is not allowed: save the tool's settings again without it",
    );
  });

  it('a stored input schema with a reference hidden under `dependentSchemas.properties` is not run', async () => {
    // Each level refers to the next twice over: interpreted, the work doubles with each level (seconds at 22).
    let node: Record<string, unknown> = { type: 'object' };
    for (let i = 19; i >= 0; i--) node = { $ref: `#${'/dependentSchemas/properties'.repeat(i + 2)}`, dependentSchemas: { properties: node } };
    const hidden = { type: 'object', dependentSchemas: { properties: node } };
    const names = await enable([await addHttpTool(`${toolUrl}/refs`, hidden)]);
    calls = [{ name: names[0]!, arguments: { properties: 1 } }];
    const { res } = await visitorChat('Check this too');
    expect(res.status, res.text).toBe(200);
    expect(res.body.toolCalls[0].error).toBe(
      "The tool's input schema uses inputSchema.dependentSchemas.properties.$ref, which is not allowed: save the tool's settings again without it",
    );
  });

  it('the enabled-tools list names each tool as the model is offered it, a second account numbered', async () => {
    const first = await addHttpTool(`${toolUrl}/a`, { type: 'object' });
    const second = await addHttpTool(`${toolUrl}/b`, { type: 'object' });
    const listed = await enable([first, second]);
    expect(listed).toEqual(['http__call', 'http__call_2']);
    calls = [];
    const { res } = await visitorChat('Anything?');
    expect(res.status, res.text).toBe(200);
    expect(
      offeredNames
        .at(-1)!
        .filter((n) => n.startsWith('http__'))
        .sort(),
    ).toEqual(listed);
    const got = await app.request('GET', `/api/v1/toolhub/enabled-tools?configId=${configId}`, { token: owner.token });
    expect(got.body.data.tools.map((t: { name: string }) => t.name)).toEqual(listed);
  });

  it("a model call offered tools that outlasts the tools' window is dropped, and the final answer still comes", async () => {
    const [name] = await enable([await addHttpTool(`${toolUrl}/fast`, { type: 'object' })]);
    calls = [{ name: name!, arguments: {} }];
    // The second call, still offered tools after the first round, would run past the tools' window (600 ms).
    modelDelays = [0, 900];
    const before = offeredTools.length;
    const { res } = await visitorChat('Look it up, then again');
    modelDelays = [];
    expect(res.status, res.text).toBe(200);
    expect(res.body.message).toBe('Here is what I found.');
    expect(res.body.toolCalls).toEqual([{ name, arguments: {}, result: { found: true } }]);
    expect(offeredTools.slice(before)).toEqual([1, 1, 0]);
  });
});
