import { connect as tcpConnect } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '../helpers/eventually.ts';
import { assertMatchesContract } from '../helpers/openapi-contract.ts';
import { parseRawResponse, type RawResponse } from '../helpers/raw-https.ts';
import { multipartBody, openApiContract, startTestApp, type TestApp } from '../helpers/test-app.ts';

// Request bodies held in memory are bounded per client and per instance (README, "Bodies held in memory are budgeted"): a
// client that sends part of a body and stalls holds it, and its connections and the instance's are not endless.
// Clients are told apart by their address: each test client connects from its own loopback address (127.0.0.0/8).

/** Declared by every stalled body: under the 1 MiB JSON cap; two fill a client's budget exactly, three the instance's. */
const STALLED_BYTES = 1_000_000;
const LIMITS = {
  BODY_MEMORY_LIMIT_BYTES: String(3 * STALLED_BYTES),
  BODY_MEMORY_PER_CLIENT_BYTES: String(2 * STALLED_BYTES),
  // Refusals of bodies count against the rate limits too; these tests are about the body budget only.
  RATE_LIMIT_SUPPORT: '10000',
  RATE_LIMIT_SUPPORT_GLOBAL: '10000',
  RATE_LIMIT_DEFAULT: '10000',
  RATE_LIMIT_UPLOAD: '10000',
};
const CONTACT = '/api/v1/support/contact';

interface Exchange {
  /** The answer, once complete; undefined if the connection closed without one. */
  answer: Promise<RawResponse | undefined>;
  /** Milliseconds from the request's start until the server or the client closed the connection. */
  closed: Promise<number>;
  /** Sends more of the body (after the head, whenever called). */
  write(bytes: Buffer | string): void;
  /** Closes the connection as a client that goes away does. */
  close(): void;
  /** Resets it (TCP RST): the server's socket fails with ECONNRESET. */
  reset(): void;
}

/** Sends the head and `sent` bytes of a request declaring `declared` bytes of body (none: chunked), from `from`, and leaves it open. */
function begin(
  app: TestApp,
  method: string,
  path: string,
  options: { from: string; headers?: Record<string, string>; declared?: number; sent: Buffer | string },
): Exchange {
  const url = new URL(app.url);
  const started = Date.now();
  const tcp = tcpConnect({ host: url.hostname, port: Number(url.port), localAddress: options.from });
  const socket = tlsConnect({ socket: tcp, rejectUnauthorized: false });
  tcp.on('error', () => {});
  socket.on('error', () => {});
  const received: Buffer[] = [];
  let done: (response: RawResponse | undefined) => void;
  const answer = new Promise<RawResponse | undefined>((resolve) => {
    done = resolve;
  });
  socket.on('data', (chunk: Buffer) => {
    received.push(chunk);
    const raw = Buffer.concat(received);
    const parsed = parseRawResponse(raw);
    const length = Number(parsed?.headers['content-length'] ?? NaN);
    if (parsed && Buffer.byteLength(parsed.text) >= length) done(parsed);
  });
  const closed = new Promise<number>((resolve) =>
    socket.once('close', () => {
      done(parseRawResponse(Buffer.concat(received)));
      resolve(Date.now() - started);
    }),
  );
  const connected = new Promise((resolve) => socket.once('secureConnect', resolve));
  socket.once('secureConnect', () => {
    const head = [`${method} ${path} HTTP/1.1`, `Host: ${url.host}`];
    if (options.declared !== undefined) head.push(`Content-Length: ${options.declared}`);
    for (const [name, value] of Object.entries(options.headers ?? {})) head.push(`${name}: ${value}`);
    socket.write(`${head.join('\r\n')}\r\n\r\n`);
    socket.write(options.sent);
  });
  return {
    answer,
    closed,
    write: (bytes) => void connected.then(() => socket.write(bytes)),
    close: () => socket.destroy(),
    reset: () => tcp.resetAndDestroy(),
  };
}

const json = { 'Content-Type': 'application/json' };
const open: Exchange[] = [];

/** A body that stalls: most of it is never sent. */
function stall(
  app: TestApp,
  from: string,
  path = CONTACT,
  headers: Record<string, string> = json,
  sent: Buffer | string = `{"message":"${'x'.repeat(64 * 1024)}`,
) {
  const exchange = begin(app, 'POST', path, { from, headers, declared: STALLED_BYTES, sent });
  open.push(exchange);
  return exchange;
}

/** An upload that stalls inside its file part. */
function stallUpload(app: TestApp, from: string, token: string) {
  const { body, contentType } = multipartBody({ fileName: 'big.txt', contentType: 'text/plain', bytes: Buffer.alloc(STALLED_BYTES - 1_000, 'x') });
  return stall(app, from, '/api/v1/knowledge-base/documents', { 'Content-Type': contentType, Authorization: `Bearer ${token}` }, body.subarray(0, 64 * 1024));
}

/** A whole small request; its answer. */
async function call(app: TestApp, from: string, path: string, body: string | Buffer, headers: Record<string, string> = json): Promise<RawResponse> {
  const exchange = begin(app, 'POST', path, { from, headers: { ...headers, Connection: 'close' }, declared: Buffer.byteLength(body), sent: body });
  const answer = await exchange.answer;
  exchange.close();
  if (!answer) throw new Error(`no answer to POST ${path} from ${from}`);
  return answer;
}

/** Answers until `check` holds: a stalled body is held once the server has read its head, which the client cannot see. */
async function answerWhen(ask: () => Promise<RawResponse>, check: (res: RawResponse) => boolean, what: string): Promise<RawResponse> {
  let last: RawResponse | undefined;
  await eventually(
    async () => {
      last = await ask();
      return check(last);
    },
    what,
    10_000,
  );
  return last!;
}

const status = (code: number) => (res: RawResponse) => res.status === code;
const bodyOf = (res: RawResponse) => res.body as any;

function closeAll() {
  for (const exchange of open.splice(0)) exchange.close();
}

function expectBudgetRefusal(res: RawResponse, httpStatus: 429 | 503) {
  expect(res.status, res.text).toBe(httpStatus);
  expect(Number(res.headers['retry-after'])).toBeGreaterThan(0);
}

describe('the body memory budget', () => {
  let app: TestApp;
  let token: string;
  beforeAll(async () => {
    app = await startTestApp(LIMITS);
    token = (await app.signUp('budget')).token;
  });
  afterEach(async () => {
    closeAll();
    // Released once the server sees the connections close: a body of the instance's whole budget fits again.
    await answerWhen(() => call(app, '127.0.0.99', CONTACT, '{}'), status(400), 'the budget released');
  });
  afterAll(() => app?.stop());

  it("refuses a client whose stalled bodies fill its share with 429, on every interface, while another client's get through", async () => {
    stall(app, '127.0.0.11');
    stall(app, '127.0.0.11');
    const refused = await answerWhen(() => call(app, '127.0.0.11', CONTACT, '{}'), status(429), 'the third body of 127.0.0.11 refused');
    expectBudgetRefusal(refused, 429);
    expect(bodyOf(refused)).toMatchObject({ success: false, error: { code: 'RATE_LIMITED', message: 'Too many request bodies in progress' } });
    assertMatchesContract(await openApiContract(app.url), 'POST', CONTACT, refused);

    const trpc = await call(app, '127.0.0.11', '/trpc/support.contact', '{}');
    expectBudgetRefusal(trpc, 429);
    expect(bodyOf(trpc).error.data).toMatchObject({ httpStatus: 429, appCode: 'RATE_LIMITED' });

    const graphql = await call(app, '127.0.0.11', '/graphql', '{"query":"{ me { id } }"}');
    expectBudgetRefusal(graphql, 429);
    expect(bodyOf(graphql).errors[0].extensions).toMatchObject({ code: 'RATE_LIMITED' });

    const { body, contentType } = multipartBody({ fileName: 'a.txt', contentType: 'text/plain', bytes: Buffer.from('A document.') });
    const upload = await call(app, '127.0.0.11', '/api/v1/knowledge-base/documents', body, {
      'Content-Type': contentType,
      Authorization: `Bearer ${token}`,
    });
    expectBudgetRefusal(upload, 429);
    expect(bodyOf(upload).error.code).toBe('RATE_LIMITED');

    // Another client is not refused: its body is read (and found invalid).
    const other = await call(app, '127.0.0.12', CONTACT, '{}');
    expect(other.status, other.text).toBe(400);
    expect(bodyOf(other).error.code).toBe('VALIDATION_FAILED');
  });

  it('counts stalled uploads, and a GraphQL or tRPC body, against the client like a JSON body', async () => {
    stallUpload(app, '127.0.0.21', token);
    stall(app, '127.0.0.21', '/graphql');
    expectBudgetRefusal(await answerWhen(() => call(app, '127.0.0.21', CONTACT, '{}'), status(429), 'upload and GraphQL body held'), 429);
    closeAll();
    stall(app, '127.0.0.22', '/trpc/support.contact');
    stall(app, '127.0.0.22');
    expectBudgetRefusal(await answerWhen(() => call(app, '127.0.0.22', CONTACT, '{}'), status(429), 'tRPC and JSON body held'), 429);
  });

  it('refuses with 503 once the bodies of all clients fill the instance, and takes bodies again once they close', async () => {
    stall(app, '127.0.0.31');
    stall(app, '127.0.0.31');
    stall(app, '127.0.0.32');
    const refused = await answerWhen(() => call(app, '127.0.0.33', CONTACT, '{}'), status(503), 'the instance budget full');
    expectBudgetRefusal(refused, 503);
    expect(bodyOf(refused)).toMatchObject({ success: false, error: { code: 'SERVICE_UNAVAILABLE' } });
    assertMatchesContract(await openApiContract(app.url), 'POST', CONTACT, refused);
    const graphql = await call(app, '127.0.0.33', '/graphql', '{"query":"{ me { id } }"}');
    expectBudgetRefusal(graphql, 503);
    expect(bodyOf(graphql).errors[0].extensions).toMatchObject({ code: 'SERVICE_UNAVAILABLE' });

    closeAll();
    const accepted = await answerWhen(() => call(app, '127.0.0.33', CONTACT, '{}'), status(400), 'bodies taken again after the stalled ones closed');
    expect(bodyOf(accepted).error.code).toBe('VALIDATION_FAILED');
  });

  it('gives back exactly what it held on every way a body ends: complete, malformed, too large, cut off, reset', async () => {
    const contract = await openApiContract(app.url);
    const from = '127.0.0.41';
    expect((await call(app, from, CONTACT, '{}')).status).toBe(400);
    expect(bodyOf(await call(app, from, CONTACT, '{"name":')).error.code).toBe('MALFORMED_JSON');
    expect((await call(app, from, '/graphql', '{"query":"{ me { id } }"}')).status).toBe(200);
    expect((await call(app, from, '/trpc/support.contact', '{}')).status).toBe(400);
    const tooLarge = begin(app, 'POST', CONTACT, { from, headers: json, declared: 2 * STALLED_BYTES, sent: '{' });
    expect((await tooLarge.answer)?.status).toBe(413);
    tooLarge.close();
    // Chunked, so the cap is passed while the body arrives, after some of it was held.
    const chunk = `${(1_200_000).toString(16)}\r\n${'x'.repeat(1_200_000)}\r\n`;
    const chunked = begin(app, 'POST', CONTACT, { from, headers: { ...json, 'Transfer-Encoding': 'chunked' }, sent: chunk });
    expect((await chunked.answer)?.status).toBe(413);
    chunked.close();
    const { body, contentType } = multipartBody({ fileName: 'a.txt', contentType: 'text/plain', bytes: Buffer.from('A document.') });
    const cut = await call(app, from, '/api/v1/knowledge-base/documents', body.subarray(0, body.length - 30), {
      'Content-Type': contentType,
      Authorization: `Bearer ${token}`,
    });
    expect(cut.status, cut.text).toBe(400);
    for (const path of [CONTACT, '/graphql', '/trpc/support.contact']) {
      const dropped = stall(app, from, path);
      await new Promise((resolve) => setTimeout(resolve, 100));
      dropped.close();
    }
    const droppedUpload = stallUpload(app, from, token);
    await new Promise((resolve) => setTimeout(resolve, 100));
    droppedUpload.close();
    const reset = stall(app, from);
    await new Promise((resolve) => setTimeout(resolve, 100));
    reset.reset();
    closeAll();
    await answerWhen(() => call(app, '127.0.0.42', CONTACT, '{}'), status(400), 'everything released');

    // Nothing leaked (the whole budget takes three stalled bodies) and nothing was given back twice (a fourth body,
    // however small, does not fit).
    const filling = [stall(app, '127.0.0.43'), stall(app, '127.0.0.43'), stall(app, '127.0.0.44')];
    const full = await answerWhen(() => call(app, '127.0.0.45', CONTACT, '{}'), status(503), 'the instance budget exactly full');
    assertMatchesContract(contract, 'POST', CONTACT, full);
    const unanswered = new Promise((resolve) => setTimeout(() => resolve('still sending'), 200));
    for (const exchange of filling) expect(await Promise.race([exchange.answer, unanswered])).toBe('still sending');
  });

  it('takes the client key of rate limiting: an IPv6 /64 is one client', async () => {
    await app.stop();
    app = await startTestApp({ ...LIMITS, TRUST_PROXY: '1' });
    token = (await app.signUp('budget')).token;
    const via = (address: string) => ({ ...json, 'X-Forwarded-For': address });
    stall(app, '127.0.0.51', CONTACT, via('2001:db8:1:2::1'));
    stall(app, '127.0.0.52', CONTACT, via('2001:db8:1:2:ffff::7'));
    const sameNetwork = await answerWhen(
      () => call(app, '127.0.0.53', CONTACT, '{}', via('2001:db8:1:2:abcd::9')),
      status(429),
      'a third address of the same /64 refused',
    );
    expectBudgetRefusal(sameNetwork, 429);
    expect((await call(app, '127.0.0.53', CONTACT, '{}', via('2001:db8:1:3::1'))).status).toBe(400);
  });

  it('the OpenAPI document lists both refusals, with Retry-After, on the operations that read a body', async () => {
    const { paths } = (await openApiContract(app.url)).document;
    for (const path of [CONTACT, '/api/v1/knowledge-base/documents', '/api/v1/payments/webhook', '/api/v1/chat/{slug}']) {
      const { responses } = paths[path].post;
      for (const code of ['429', '503']) expect(responses[code]?.headers?.['Retry-After'], `POST ${path} ${code}`).toBeDefined();
    }
    // The chat operation's own 503 (no backend) is kept beside the budget's.
    expect(paths['/api/v1/chat/{slug}'].post.responses['503'].description).toMatch(/no backend.*body memory budget/s);
    expect(paths['/api/v1/api-keys'].get.responses['503']).toBeUndefined();
  });
});

describe('a body that stops arriving', () => {
  const IDLE_MS = 1_000;
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp({ ...LIMITS, BODY_IDLE_TIMEOUT_MS: String(IDLE_MS) });
  });
  afterEach(closeAll);
  afterAll(() => app?.stop());

  function expectIdleTimeout(answer: RawResponse | undefined, closedAfterMs: number) {
    expect(answer?.status, answer?.text).toBe(408);
    expect(answer?.body).toMatchObject({ success: false, error: { code: 'REQUEST_TIMEOUT', details: 'The request body stopped arriving' } });
    // Long before the 15-minute request deadline, and not before the idle limit.
    expect(closedAfterMs).toBeGreaterThanOrEqual(IDLE_MS - 100);
    expect(closedAfterMs).toBeLessThan(IDLE_MS + 5_000);
  }

  it('is answered 408 with the envelope, its connection closed, and what it held given back', async () => {
    const first = stall(app, '127.0.0.61');
    stall(app, '127.0.0.61');
    expectBudgetRefusal(await answerWhen(() => call(app, '127.0.0.61', CONTACT, '{}'), status(429), 'the client budget full'), 429);
    const [answer, closedAfterMs] = await Promise.all([first.answer, first.closed]);
    expectIdleTimeout(answer, closedAfterMs);
    await answerWhen(() => call(app, '127.0.0.61', CONTACT, '{}'), status(400), 'the timed-out bodies released');
  });

  it('so is an upload that stalls inside its file', async () => {
    const { token } = await app.signUp('idle');
    const upload = stallUpload(app, '127.0.0.62', token);
    const [answer, closedAfterMs] = await Promise.all([upload.answer, upload.closed]);
    expectIdleTimeout(answer, closedAfterMs);
  });

  it('a slow but steady body is never cut, however long it takes in all', async () => {
    const body = Buffer.from('{"name":"Slow","email":"not an address"}');
    const slow = begin(app, 'POST', CONTACT, { from: '127.0.0.63', headers: { ...json, Connection: 'close' }, declared: body.length, sent: '' });
    open.push(slow);
    const started = Date.now();
    for (let offset = 0; offset < body.length; offset += 4) {
      await new Promise((resolve) => setTimeout(resolve, IDLE_MS / 3));
      slow.write(body.subarray(offset, offset + 4));
    }
    const answer = await slow.answer;
    expect(Date.now() - started).toBeGreaterThan(3 * IDLE_MS);
    expect(answer?.status, answer?.text).toBe(400);
    expect(answer?.body).toMatchObject({ error: { code: 'VALIDATION_FAILED' } });
  });
});
