import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { streamEndpoint } from './connector.ts';
import { createGuardedHttpClient } from '../../http/guarded-client.ts';

// A hostile flow upstream: the quadratic framer ran for minutes on this stream (now it would hit the test timeout).
describe('flow stream framing', () => {
  it('a stream of thousands of lines that never close a JSON value is framed in linear time', async () => {
    const upstream = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/x-ndjson' });
      res.end('[\n' + '1,\n'.repeat(200_000));
    });
    await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
    const port = (upstream.address() as AddressInfo).port;
    try {
      const http = createGuardedHttpClient({ allowHosts: [`127.0.0.1:${port}`] });
      const events = streamEndpoint(http, {
        endpointUrl: `http://127.0.0.1:${port}/api/v1/run/flow`,
        type: 'flow',
        message: 'hi',
        sessionId: 's',
        timeoutMs: 20_000,
      });
      await expect(async () => {
        for await (const _ of events) void _;
      }).rejects.toMatchObject({ kind: 'invalid_response' });
    } finally {
      upstream.close();
    }
  });
});
