import net from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createGuardedHttpClient, type GuardedHttpClient } from '../../http/guarded-client.ts';
import { REDIRECT_TARGET_PATH, startProviderMock, type ProviderMock, type ProviderMockMode } from '../../../../test/helpers/provider-mock-servers.ts';
import { AiUpstreamError, upstreamMessages, type AiErrorKind } from '../core/upstream-error.ts';
import { callEndpoint, streamEndpoint } from './connector.ts';
import type { ConnectorRequest, EndpointType } from './types.ts';

const MESSAGES = upstreamMessages('endpoint');

const KEY = 'sk-secret-0d9e8f7a6b5c';

let mock: ProviderMock;
let http: GuardedHttpClient;

beforeAll(async () => {
  mock = await startProviderMock();
  http = createGuardedHttpClient({ allowHosts: [`127.0.0.1:${mock.port}`] });
});
afterAll(async () => {
  await mock.close();
});
beforeEach(() => mock.reset());

type Mode = 'call' | 'stream';

async function failure(mode: Mode, req: ConnectorRequest, client: GuardedHttpClient = http): Promise<AiUpstreamError> {
  try {
    if (mode === 'call') await callEndpoint(client, req);
    else for await (const event of streamEndpoint(client, req)) void event;
  } catch (err) {
    expect(err).toBeInstanceOf(AiUpstreamError);
    const error = err as AiUpstreamError;
    expect(error.source).toBe('endpoint');
    // The key is never echoed, whatever the upstream sent back.
    expect(error.message).not.toContain(KEY);
    expect(error.detail ?? '').not.toContain(KEY);
    expect(String(error.stack)).not.toContain(KEY);
    return error;
  }
  throw new Error('expected an AiUpstreamError');
}

const ENDPOINTS: Array<[EndpointType, (base: string) => string]> = [
  ['flow', (base) => `${base}/langflow/api/v1/run/flow-1`],
  ['openai', (base) => `${base}/v1/chat/completions`],
  ['messages', (base) => `${base}/claude/v1/messages`],
  ['generation', (base) => `${base}/v1beta/models/gemini-2.5-flash:generateContent`],
  ['generic', (base) => `${base}/generic`],
];

const CASES: Array<[ProviderMockMode, AiErrorKind, number | undefined, RegExp]> = [
  ['non-json', 'invalid_response', undefined, /^invalid response format: the external API did not return JSON$/],
  ['wrong-shape', 'invalid_response', undefined, /^invalid response format: the reply has no recognised text field/],
  // Printing the reported error recursed past the stack's end, as an internal error.
  ['too-deep', 'invalid_response', undefined, /^invalid response format: the external API returned JSON nested more than 64 levels deep$/],
  ['401', 'auth_failed', 401, /rejected the API key.*\(HTTP 401\)/],
  ['429', 'rate_limited', 429, /rate limiting requests.*\(HTTP 429\)/],
  ['500', 'upstream_error', 500, /^the external API answered HTTP 500: Internal Server Error upstream exploded$/],
  ['redirect-private', 'upstream_error', 302, /redirect.*not followed.*use the final URL/],
];

describe.each(ENDPOINTS)('%s endpoint failures', (type, makeUrl) => {
  describe.each<Mode>(['call', 'stream'])('%s', (mode) => {
    const req = (extra: Partial<ConnectorRequest> = {}): ConnectorRequest => ({
      endpointUrl: makeUrl(mock.url),
      type,
      apiKey: KEY,
      message: 'hello',
      sessionId: 's',
      ...extra,
    });

    it.each(CASES)('%s → %s', async (mockMode, kind, status, message) => {
      mock.setMode(mockMode);
      const error = await failure(mode, req());
      expect(error.kind).toBe(kind);
      expect(error.status).toBe(status);
      expect(error.message).toMatch(message);
      expect(mock.requests).toHaveLength(1);
      if (mockMode === '401') {
        // The mock echoes the key in its error: it reaches us redacted.
        expect(error.detail).toContain('Incorrect API key provided: [redacted]');
      }
      if (mockMode === 'redirect-private') {
        await new Promise((resolve) => setTimeout(resolve, 50));
        expect(mock.requests.filter((r) => r.path === REDIRECT_TARGET_PATH)).toHaveLength(0);
      }
    });

    it('slow → timeout naming the actual limit', async () => {
      mock.setMode('slow', { delayMs: 3000 });
      const started = Date.now();
      const error = await failure(mode, req({ timeoutMs: 300 }));
      expect(error.kind).toBe('timeout');
      expect(error.message).toBe('the external API took longer than 0.3 seconds to answer');
      expect(Date.now() - started).toBeLessThan(2500);
    });
  });
});

describe('transport failures', () => {
  async function closedPort(): Promise<number> {
    const server = net.createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as net.AddressInfo).port;
    await new Promise<void>((resolve) => server.close(() => resolve()));
    return port;
  }

  it.each<Mode>(['call', 'stream'])('connection refused on a closed port → connection_failed explaining local addresses and tunnels (%s)', async (mode) => {
    const port = await closedPort();
    const client = createGuardedHttpClient({ allowHosts: [`127.0.0.1:${port}`] });
    const error = await failure(mode, { endpointUrl: `http://127.0.0.1:${port}/v1/chat/completions`, apiKey: KEY, message: 'm', sessionId: 's' }, client);
    expect(error.kind).toBe('connection_failed');
    expect(error.message).toBe(MESSAGES.connectionFailed);
    expect(error.message).toMatch(/localhost/);
    expect(error.message).toMatch(/127\.0\.0\.1/);
    expect(error.message).toMatch(/tunnelling service with a public HTTPS address/);
    expect(error.detail).toMatch(/ECONNREFUSED/);
  });

  it.each<Mode>(['call', 'stream'])('a loopback literal outside the allow-list → blocked (%s)', async (mode) => {
    const client = createGuardedHttpClient({ allowHosts: [] });
    const error = await failure(mode, { endpointUrl: 'http://127.0.0.1:1/', apiKey: KEY, message: 'm', sessionId: 's' }, client);
    expect(error.kind).toBe('blocked');
    expect(error.message).toBe(
      'the endpoint resolves to a private or local address, which the service will not call; expose it through a tunnelling service with a public HTTPS address',
    );
  });

  it('a host name resolving to loopback is blocked and the server behind it never receives the request', async () => {
    // Only the literal 127.0.0.1:<port> is allow-listed, not `localhost`.
    const error = await failure('call', { endpointUrl: `http://localhost:${mock.port}/v1/chat/completions`, message: 'm', sessionId: 's' });
    expect(error.kind).toBe('blocked');
    expect(mock.requests).toHaveLength(0);
  });

  it('the mock outside the allow-list → blocked, zero requests', async () => {
    const client = createGuardedHttpClient({ allowHosts: [] });
    for (const [type, makeUrl] of ENDPOINTS) {
      const error = await failure('call', { endpointUrl: makeUrl(mock.url), type, apiKey: KEY, message: 'm', sessionId: 's' }, client);
      expect(error.kind).toBe('blocked');
    }
    expect(mock.requests).toHaveLength(0);
  });

  it('an invalid or non-http URL → connection_failed with a clear message', async () => {
    for (const endpointUrl of ['not a url', 'ftp://example.com/x', 'http://user:pass@example.com/x']) {
      const error = await failure('call', { endpointUrl, message: 'm', sessionId: 's' });
      expect(error.kind).toBe('connection_failed');
      expect(error.message).toBe(MESSAGES.invalidUrl);
    }
  });

  it('an aborted signal → aborted, saying the request was cancelled', async () => {
    mock.setMode('slow', { delayMs: 3000 });
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 100);
    const error = await failure('call', { endpointUrl: `${mock.url}/generic`, message: 'm', sessionId: 's', signal: controller.signal });
    expect(error.kind).toBe('aborted');
    expect(error.message).toBe(MESSAGES.aborted);
  });

  it('the default timeout message names 30 seconds', () => {
    expect(MESSAGES.timeout(30_000)).toBe('the external API took longer than 30 seconds to answer');
    expect(MESSAGES.timeout(1_000)).toBe('the external API took longer than 1 second to answer');
  });
});
