import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createGuardedHttpClient } from '../../adapters/outbound/http/guarded-client.ts';
import type { Config } from '../../schema/config.ts';
import { OAuthError, requestTokens } from './oauth.ts';

let server: Server;
let tokenUrl: string;
let answer: { status: number; body: unknown } = { status: 200, body: {} };

beforeAll(async () => {
  server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(answer.status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(answer.body));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  tokenUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/token`;
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

async function refusal(status: number, body: unknown): Promise<OAuthError> {
  answer = { status, body };
  const deps = {
    http: createGuardedHttpClient({ allowHosts: [new URL(tokenUrl).host] }),
    config: { OUTBOUND_TIMEOUT_MS: 5_000 } as Config,
  };
  try {
    await requestTokens(deps, tokenUrl, { grant_type: 'refresh_token', refresh_token: 'r' });
  } catch (error) {
    expect(error).toBeInstanceOf(OAuthError);
    return error as OAuthError;
  }
  throw new Error('the token request was not refused');
}

describe('requestTokens refusals', () => {
  it("keeps the provider's error code when it is an identifier", async () => {
    expect((await refusal(400, { error: 'invalid_grant', error_description: 'Token revoked' })).code).toBe('invalid_grant');
    expect((await refusal(200, { ok: false, error: 'token_revoked' })).code).toBe('token_revoked');
  });

  it('never passes free text on as the code (it can reach a visitor through a tool error)', async () => {
    const free = 'Your account <b>acme</b> is suspended: call +1 555 0100';
    const error = await refusal(400, { error: free });
    expect(error.code).toBe('unknown_error');
    expect(error.code).not.toContain('acme');
  });

  it('names the status when there is no error field', async () => {
    expect((await refusal(503, { message: 'down' })).code).toBe('http_503');
  });
});
