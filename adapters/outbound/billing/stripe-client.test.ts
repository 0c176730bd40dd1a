import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createGuardedHttpClient } from '../http/guarded-client.ts';
import { createStripeClient } from './stripe-client.ts';

/** The fetch hook's retries: a failed connection and a retryable answer are retried; Stripe's "do not retry" is obeyed. */

let server: Server;
let hostPort: string;
const script: Array<'reset' | number> = [];
let seen = 0;

beforeAll(async () => {
  server = createServer((req, res) => {
    seen++;
    const step = script.shift() ?? 200;
    if (step === 'reset') return req.socket.destroy();
    const headers: Record<string, string> = { 'content-type': 'application/json' };
    if (step === 503) headers['stripe-should-retry'] = 'false';
    const body = step === 200 ? { id: 'cus_1', object: 'customer' } : { error: { type: 'api_error', message: 'try again' } };
    res.writeHead(step === 503 ? 500 : step, headers).end(JSON.stringify(body));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  hostPort = `127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

const client = () =>
  createStripeClient({
    secretKey: 'sk_test_retries',
    apiUrl: `http://${hostPort}`,
    http: createGuardedHttpClient({ allowHosts: [hostPort] }),
    timeoutMs: 5000,
  });

describe('the Stripe client', () => {
  it('retries a dropped connection and a server error, twice at most', async () => {
    script.push('reset', 500);
    seen = 0;
    expect((await client().customers.retrieve('cus_1')).id).toBe('cus_1');
    expect(seen).toBe(3);
    script.push(500, 500, 500);
    seen = 0;
    await expect(client().customers.retrieve('cus_1')).rejects.toMatchObject({ statusCode: 500 });
    expect(seen).toBe(3);
  });

  it('does not retry when Stripe says not to', async () => {
    script.push(503);
    seen = 0;
    await expect(client().customers.retrieve('cus_1')).rejects.toMatchObject({ statusCode: 500 });
    expect(seen).toBe(1);
  });
});
