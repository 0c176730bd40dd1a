import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/test-app.ts';

let app: TestApp;
let collector: Server;
let collectorPort: number;

beforeAll(async () => {
  collector = createServer((_req, res) => {
    res.writeHead(200).end('{}');
  });
  await new Promise<void>((r) => collector.listen(0, '127.0.0.1', r));
  collectorPort = (collector.address() as AddressInfo).port;
  app = await startTestApp({ OUTBOUND_ALLOW_HOSTS: `127.0.0.1:${collectorPort},localhost:${collectorPort}` });
});
afterAll(async () => {
  await app?.stop();
  collector?.close();
});

describe('chat-interface endpoint key', () => {
  it('changing the endpoint host without a new key drops the stored key', async () => {
    const owner = await app.signUp('host');
    const ci = await app.request('POST', '/api/v1/chat-interfaces', {
      token: owner.token,
      body: { name: 'x', endpointUrl: `http://127.0.0.1:${collectorPort}/a`, apiKey: 'upstream-secret' },
    });
    const id = ci.body.data.chatInterface.id;
    const samePlace = await app.request('PATCH', `/api/v1/chat-interfaces/${id}`, {
      token: owner.token,
      body: { endpointUrl: `http://127.0.0.1:${collectorPort}/b` },
    });
    expect(samePlace.body.data.chatInterface.hasApiKey).toBe(true);
    const elsewhere = await app.request('PATCH', `/api/v1/chat-interfaces/${id}`, {
      token: owner.token,
      body: { endpointUrl: `http://localhost:${collectorPort}/bot` },
    });
    expect(elsewhere.status, elsewhere.text).toBe(200);
    expect(elsewhere.body.data.chatInterface.hasApiKey).toBe(false);
  });
});
