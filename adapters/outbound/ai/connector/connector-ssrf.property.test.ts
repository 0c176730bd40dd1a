/**
 * Property: whatever spelling of a loopback, private or link-local IPv4
 * address an endpoint URL uses (decimal, octal, hex, mixed, short forms,
 * IPv4-mapped/compatible/NAT64 IPv6), callEndpoint fails with 'blocked' (or
 * 'connection_failed') and nothing reaches the local provider mock, which
 * listens on 127.0.0.1 at the port the URLs name.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createGuardedHttpClient } from '../../http/guarded-client.ts';
import { startProviderMock, type ProviderMock } from '../../../../test/helpers/provider-mock-servers.ts';
import { callEndpoint } from './connector.ts';
import { AiUpstreamError } from '../core/upstream-error.ts';
import type { EndpointType } from './types.ts';

let mock: ProviderMock;

beforeAll(async () => {
  mock = await startProviderMock();
});
afterAll(async () => {
  await mock.close();
});

/** [first address, size] of the blocked ranges the generator draws from. */
const RANGES: Array<[number, number]> = [
  [ip(127, 0, 0, 0), 2 ** 24], // loopback
  [ip(10, 0, 0, 0), 2 ** 24], // private
  [ip(172, 16, 0, 0), 2 ** 20], // private
  [ip(192, 168, 0, 0), 2 ** 16], // private
  [ip(169, 254, 0, 0), 2 ** 16], // link-local (cloud metadata)
  [ip(0, 0, 0, 0), 2 ** 24], // "this network" (0.0.0.0 reaches localhost)
];

function ip(a: number, b: number, c: number, d: number): number {
  return ((a << 24) >>> 0) + (b << 16) + (c << 8) + d;
}

const blockedAddress = fc.tuple(fc.integer({ min: 0, max: RANGES.length - 1 }), fc.nat()).map(([range, offset]) => {
  const [start, size] = RANGES[range]!;
  return start + (offset % size);
});
/** Always includes the mock's own address, so a bypass would actually be observed. */
const address = fc.oneof({ weight: 3, arbitrary: blockedAddress }, { weight: 1, arbitrary: fc.constant(ip(127, 0, 0, 1)) });

type Radix = 'dec' | 'oct' | 'hex' | 'HEX';
const radix = fc.constantFrom<Radix>('dec', 'oct', 'hex', 'HEX');

function spell(n: number, r: Radix, pad: number): string {
  switch (r) {
    case 'dec':
      return String(n);
    case 'oct':
      return `0${'0'.repeat(pad)}${n.toString(8)}`;
    case 'hex':
      return `0x${'0'.repeat(pad)}${n.toString(16)}`;
    case 'HEX':
      return `0X${'0'.repeat(pad)}${n.toString(16).toUpperCase()}`;
  }
}

function octets(v: number): [number, number, number, number] {
  return [v >>> 24, (v >>> 16) & 255, (v >>> 8) & 255, v & 255];
}

function hex4(v: number): [string, string] {
  return [(v >>> 16).toString(16), (v & 0xffff).toString(16)];
}

/** One host spelling of the address v (what goes between `http://` and `:port`). */
const hostSpelling = (v: number) => {
  const [a, b, c, d] = octets(v);
  const [hi, lo] = hex4(v);
  return fc.oneof(
    fc.constant(`${a}.${b}.${c}.${d}`),
    fc.constant(`${a}.${b}.${c}.${d}.`), // trailing dot
    fc.tuple(radix, fc.integer({ min: 0, max: 3 })).map(([r, pad]) => spell(v, r, pad)), // one 32-bit number
    fc
      .tuple(fc.array(radix, { minLength: 4, maxLength: 4 }), fc.integer({ min: 0, max: 2 }))
      .map(([rs, pad]) => [a, b, c, d].map((n, i) => spell(n, rs[i]!, pad)).join('.')), // mixed per octet
    fc.tuple(radix, radix, radix).map(([r1, r2, r3]) => `${spell(a, r1, 0)}.${spell(b, r2, 0)}.${spell((c << 8) + d, r3, 0)}`), // a.b.c16
    fc.tuple(radix, radix).map(([r1, r2]) => `${spell(a, r1, 0)}.${spell((b << 16) + (c << 8) + d, r2, 1)}`), // a.b24
    fc.constant(`[::ffff:${a}.${b}.${c}.${d}]`), // IPv4-mapped, dotted
    fc.constant(`[::ffff:${hi}:${lo}]`), // IPv4-mapped, hex
    fc.constant(`[0:0:0:0:0:ffff:${hi}:${lo}]`), // IPv4-mapped, uncompressed
    fc.constant(`[::FFFF:${hi.toUpperCase()}:${lo.toUpperCase()}]`),
    fc.constant(`[::${a}.${b}.${c}.${d}]`), // IPv4-compatible (deprecated)
    fc.constant(`[64:ff9b::${a}.${b}.${c}.${d}]`), // NAT64
    fc.constant(`%3${String(a).split('').join('%3')}.${b}.${c}.${d}`), // percent-encoded first octet
  );
};

const PATHS: Array<[EndpointType, string]> = [
  ['openai', '/v1/chat/completions'],
  ['flow', '/langflow/api/v1/run/flow-1'],
  ['messages', '/claude/v1/messages'],
  ['generation', '/v1beta/models/gemini-2.5-flash:generateContent'],
  ['generic', '/generic'],
];

it('every spelling of a blocked IPv4 address fails closed and never reaches the local server', async () => {
  // The mock itself is deliberately not allow-listed.
  const http = createGuardedHttpClient({ allowHosts: [] });
  const seen = new Set<string>();
  await fc.assert(
    fc.asyncProperty(
      address.chain((v) => hostSpelling(v)),
      fc.constantFrom(...PATHS),
      fc.boolean(),
      async (host, [type, path], typed) => {
        const endpointUrl = `http://${host}:${mock.port}${path}`;
        seen.add(endpointUrl);
        let error: unknown = null;
        try {
          await callEndpoint(http, { endpointUrl, ...(typed ? { type } : {}), apiKey: 'k-123456', message: 'm', sessionId: 's', timeoutMs: 2000 });
        } catch (err) {
          error = err;
        }
        expect(error, endpointUrl).toBeInstanceOf(AiUpstreamError);
        expect(['blocked', 'connection_failed'], endpointUrl).toContain((error as AiUpstreamError).kind);
        expect(mock.requests, endpointUrl).toHaveLength(0);
      },
    ),
    { numRuns: 400 },
  );
  expect(seen.size).toBeGreaterThan(100);
  expect(mock.requests).toHaveLength(0);
});

it('control: the same mock answers when its address is allow-listed', async () => {
  const http = createGuardedHttpClient({ allowHosts: [`127.0.0.1:${mock.port}`] });
  // A non-canonical spelling of the allow-listed address reaches it too: the blocks above are the policy, not a broken URL.
  const reply = await callEndpoint(http, { endpointUrl: `http://0x7f.1:${mock.port}/generic`, message: 'reached', sessionId: 's' });
  expect(reply.text).toBe('Echo: reached');
  expect(mock.requests).toHaveLength(1);
  mock.reset();
});
