import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { request as httpsRequest } from 'node:https';
import { connect as netConnect } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { multipartBody, startTestApp, type TestApp, type TestResponse } from '../helpers/test-app.ts';

// Issue 10's defects, each through the real listener: truncated and aborted bodies, NUL and lone surrogates, loose
// query integers, 413 that every client can read, client errors in the envelope, no-store and the docs page policy.

let app: TestApp;
let a: { token: string; ownerId: string; email: string };
let ci: { id: string; slug: string };
let key: string;
let configId: string;

const health = () => app.request('GET', '/api/v1/health/hosting');

/** Sends exactly these bytes on a fresh TLS connection and returns what comes back until the server closes. */
function rawExchange(bytes: Buffer, options: { endAfterWrite?: boolean; destroyAfterMs?: number } = {}): Promise<string> {
  return new Promise((resolve) => {
    const url = new URL(app.url);
    const socket = tlsConnect({ host: url.hostname, port: Number(url.port), rejectUnauthorized: false }, () => {
      socket.write(bytes);
      if (options.endAfterWrite) socket.end();
      if (options.destroyAfterMs !== undefined) setTimeout(() => socket.destroy(), options.destroyAfterMs);
    });
    const chunks: Buffer[] = [];
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('error', () => {});
    socket.on('close', () => resolve(Buffer.concat(chunks).toString('utf8')));
    setTimeout(() => socket.destroy(), 10_000);
  });
}

function requestHead(method: string, path: string, headers: Record<string, string | number>) {
  return `${method} ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\n${Object.entries(headers)
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('')}\r\n`;
}

/** A body streamed in chunks by Node's https client while the server may already have answered. */
function streamUpload(
  path: string,
  headers: Record<string, string>,
  totalBytes: number,
  chunk: Buffer,
  first?: Buffer,
): Promise<{ status: number; body: any }> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest(new URL(path, app.url), { method: 'POST', headers, rejectUnauthorized: false, agent: false }, (res) => {
      let text = '';
      res.on('data', (c) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) }));
    });
    req.on('error', reject);
    let sent = 0;
    if (first) {
      req.write(first);
      sent += first.length;
    }
    const pump = () => {
      while (sent < totalBytes) {
        const piece = chunk.subarray(0, Math.min(chunk.length, totalBytes - sent));
        sent += piece.length;
        if (!req.write(piece)) return void req.once('drain', pump);
      }
      req.end();
    };
    pump();
  });
}

function expectEnvelope(res: TestResponse, status: number, field?: string) {
  expect(res.status, res.text).toBe(status);
  expect(res.body).toMatchObject({ success: false, error: { code: expect.any(String), message: expect.any(String), details: expect.any(String) } });
  if (field) expect(res.body.error.details).toContain(field);
}

beforeAll(async () => {
  app = await startTestApp({ RATE_LIMIT_UPLOAD: '1000', RATE_LIMIT_DEFAULT: '10000', RATE_LIMIT_CHAT: '10000' });
  a = await app.signUp('harden');
  const created = await app.request('POST', '/api/v1/chat-interfaces', { token: a.token, body: { name: 'Hardened' } });
  ci = created.body.data.chatInterface;
  key = (await app.request('POST', '/api/v1/api-keys', { token: a.token, body: { name: 'k', chatInterfaceId: ci.id } })).body.data.key;
  configId = (await app.request('POST', '/api/v1/knowledge-base/configs', { token: a.token, body: { name: 'KB' } })).body.data.config.id;
});
afterAll(() => app?.stop());

describe('truncated and aborted bodies never end the process', () => {
  const truncatedMultipart = (extraFields: Record<string, string>) => {
    const { body, contentType } = multipartBody({ fileName: 'notes.txt', bytes: Buffer.alloc(4096, 'a'), contentType: 'text/plain', fields: extraFields });
    // Cut inside the file part, before its closing boundary; the HTTP framing itself is complete.
    return { body: body.subarray(0, body.length - 200), contentType };
  };

  for (const target of ['documents', 'avatar'] as const) {
    it(`a multipart body cut off inside the file part is a 400 (${target})`, async () => {
      const path = target === 'documents' ? '/api/v1/knowledge-base/documents' : `/api/v1/chat-interfaces/${ci.id}/avatar`;
      const { body, contentType } = truncatedMultipart(target === 'documents' ? { configId } : {});
      const res = await app.request('POST', path, { token: a.token, rawBody: body, headers: { 'content-type': contentType } });
      expectEnvelope(res, 400);
      expect(res.body.error.message).toMatch(/multipart/i);
      expect((await health()).status).toBe(200);
    });
  }

  it('a client that drops the connection in the middle of an upload or a JSON body leaves the service serving', async () => {
    const { body, contentType } = truncatedMultipart({ configId });
    const head = requestHead('POST', '/api/v1/knowledge-base/documents', {
      Authorization: `Bearer ${a.token}`,
      'Content-Type': contentType,
      'Content-Length': body.length + 5000,
    });
    await rawExchange(Buffer.concat([Buffer.from(head), body]), { destroyAfterMs: 100 });
    await rawExchange(Buffer.concat([Buffer.from(head), body]), { endAfterWrite: true });
    const json = requestHead('POST', '/api/v1/chat-interfaces', {
      Authorization: `Bearer ${a.token}`,
      'Content-Type': 'application/json',
      'Content-Length': 500,
    });
    await rawExchange(Buffer.from(`${json}{"name":"cut`), { destroyAfterMs: 100 });
    expect((await health()).status).toBe(200);
    const ok = await app.upload('/api/v1/knowledge-base/documents', {
      token: a.token,
      fileName: 'ok.txt',
      contentType: 'text/plain',
      bytes: Buffer.from('A complete document.'),
      fields: { configId },
    });
    expect(ok.status, ok.text).toBe(201);
    expect(app.logs.join('\n')).not.toMatch(/"level":"error"/);
  });

  it('a request Node cannot parse gets the error envelope, not a bare 400', async () => {
    const raw = await rawExchange(Buffer.from('GARBAGE / HTTP/1.1\r\nHost: x\r\n\r\n'));
    expect(raw).toMatch(/^HTTP\/1\.1 400 /);
    const body = JSON.parse(raw.slice(raw.indexOf('\r\n\r\n') + 4));
    expect(body).toMatchObject({ success: false, error: { code: 'BAD_REQUEST' } });
    const huge = await rawExchange(Buffer.from(`GET /api/v1/health/hosting HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`));
    expect(huge).toMatch(/^HTTP\/1\.1 431 /);
    expect(JSON.parse(huge.slice(huge.indexOf('\r\n\r\n') + 4)).error.code).toBe('HEADERS_TOO_LARGE');
  });

  it('an HTTP/1.1 request without a Host header gets the error envelope, not a bare 400', async () => {
    const raw = await rawExchange(Buffer.from('GET /api/v1/health/hosting HTTP/1.1\r\n\r\n'));
    expect(raw).toMatch(/^HTTP\/1\.1 400 /);
    expect(JSON.parse(raw.slice(raw.indexOf('\r\n\r\n') + 4))).toMatchObject({
      success: false,
      error: { code: 'BAD_REQUEST', details: expect.stringMatching(/Host/) },
    });
    expect((await health()).status).toBe(200);
  });

  it('bytes after a complete request that are not a request: the request is answered, then the 400, then the close', async () => {
    const created = await app.request('POST', '/api/v1/api-keys', { token: a.token, body: { name: 'trailing', chatInterfaceId: ci.id } });
    expect(created.status, created.text).toBe(201);
    const id = created.body.data.apiKey.id as string;
    // A DELETE with a body and no length (what Node's http.request sends when a body is written to it): the body is
    // the next request's first bytes, and not a request.
    const head = requestHead('DELETE', `/api/v1/api-keys/${id}`, { Authorization: `Bearer ${a.token}`, 'Content-Type': 'application/json' });
    const raw = await rawExchange(Buffer.from(`${head}{}`));
    const answers = raw.match(/HTTP\/1\.1 \d{3}/g);
    expect(answers, raw).toEqual(['HTTP/1.1 200', 'HTTP/1.1 400']);
    const last = raw.slice(raw.lastIndexOf('HTTP/1.1 400'));
    expect(JSON.parse(last.slice(last.indexOf('\r\n\r\n') + 4))).toMatchObject({ success: false, error: { code: 'BAD_REQUEST' } });
    expect((await app.request('GET', `/api/v1/api-keys/${id}`, { token: a.token })).status).toBe(404);
    const get = await rawExchange(Buffer.from(`${requestHead('GET', '/api/v1/health/hosting', {})}XYZ`));
    expect(get.match(/HTTP\/1\.1 \d{3}/g), get).toEqual(['HTTP/1.1 200', 'HTTP/1.1 400']);
  });

  it('headers far over the limit still get the 431 envelope, over TLS and plain HTTP, not a connection reset', async () => {
    // The client writes everything before reading, as curl does: the server must not close with unread bytes.
    const plainExchange = (bytes: Buffer) =>
      new Promise<string>((resolve) => {
        const url = new URL(app.url);
        const socket = netConnect({ host: url.hostname, port: Number(url.port) }, () => socket.write(bytes));
        const chunks: Buffer[] = [];
        socket.on('data', (c: Buffer) => chunks.push(c));
        socket.on('error', () => {});
        socket.on('close', () => resolve(Buffer.concat(chunks).toString('utf8')));
        setTimeout(() => socket.destroy(), 10_000);
      });
    for (const size of [60_000, 300_000]) {
      const head = Buffer.from(`GET /api/v1/health/hosting?x=${'a'.repeat(size)} HTTP/1.1\r\nHost: x\r\nX-Big: ${'b'.repeat(size)}\r\n\r\n`);
      for (let attempt = 0; attempt < 3; attempt++) {
        for (const [transport, exchange] of [
          ['tls', rawExchange],
          ['plain', plainExchange],
        ] as const) {
          const raw = await exchange(head);
          expect(raw, `${transport} ${size}`).toMatch(/^HTTP\/1\.1 431 /);
          expect(JSON.parse(raw.slice(raw.indexOf('\r\n\r\n') + 4)).error.code).toBe('HEADERS_TOO_LARGE');
        }
      }
    }
    expect((await health()).status).toBe(200);
  });

  it('while a refused connection lingers, a request sent after the error is never run', async () => {
    const url = new URL(app.url);
    const late = `{"name":"after-the-error"}`;
    const raw = await new Promise<string>((resolve) => {
      const socket = tlsConnect({ host: url.hostname, port: Number(url.port), rejectUnauthorized: false }, () => {
        socket.write('GARBAGE / HTTP/1.1\r\nHost: x\r\n\r\n');
        setTimeout(() => {
          const head = requestHead('POST', '/api/v1/chat-interfaces', {
            Authorization: `Bearer ${a.token}`,
            'Content-Type': 'application/json',
            'Content-Length': late.length,
          });
          socket.write(`${head}${late}`);
        }, 200);
      });
      const chunks: Buffer[] = [];
      socket.on('data', (c: Buffer) => chunks.push(c));
      socket.on('error', () => {});
      socket.on('close', () => resolve(Buffer.concat(chunks).toString('utf8')));
      setTimeout(() => socket.destroy(), 10_000);
    });
    expect(raw).toMatch(/^HTTP\/1\.1 400 /);
    expect(raw.match(/HTTP\/1\.1 /g)).toHaveLength(1);
    const names = (await app.request('GET', '/api/v1/chat-interfaces', { token: a.token })).body.data.chatInterfaces.map((c: { name: string }) => c.name);
    expect(names).not.toContain('after-the-error');
  });

  it('a JSON body that is not UTF-8 is a 400, not silently rewritten', async () => {
    const res = await app.request('POST', '/api/v1/chat-interfaces', {
      token: a.token,
      rawBody: Buffer.concat([Buffer.from('{"name":"bad '), Buffer.from([0xc3, 0x28]), Buffer.from('"}')]),
      headers: { 'content-type': 'application/json' },
    });
    expectEnvelope(res, 400);
    expect(res.body.error.details).toContain('UTF-8');
  });
});

describe('NUL bytes and lone surrogates are a 400 naming the field, on every interface', () => {
  const cases: Array<[string, () => Promise<TestResponse>, string]> = [
    [
      'sign-up name',
      () => app.request('POST', '/api/v1/auth/sign-up', { body: { email: 'nul@example.com', password: 'long enough password', name: 'Ann\u0000' } }),
      'name',
    ],
    ['sign-in email', () => app.request('POST', '/api/v1/auth/sign-in', { body: { email: 'x\u0000@example.com', password: 'whatever it is' } }), 'email'],
    ['chat message', () => app.request('POST', `/api/v1/chat/${ci.slug}`, { token: key, body: { message: 'hello \ud800' } }), 'message'],
    ['slug with %00', () => app.request('POST', '/api/v1/chat/ab%00cd', { token: key, body: { message: 'hi' } }), 'slug'],
    ['interface name', () => app.request('POST', '/api/v1/chat-interfaces', { token: a.token, body: { name: '\udc00x' } }), 'name'],
    [
      'welcome message',
      () => app.request('PATCH', `/api/v1/chat-interfaces/${ci.id}`, { token: a.token, body: { welcomeMessage: 'Hi\u0000' } }),
      'welcomeMessage',
    ],
    [
      'system prompt',
      () => app.request('PATCH', `/api/v1/knowledge-base/configs/${configId}`, { token: a.token, body: { systemPrompt: 'Be\u0000nice' } }),
      'systemPrompt',
    ],
    [
      'operator message',
      () => app.request('POST', '/api/v1/chat-messages', { token: a.token, body: { sessionId: 'api_1_x', message: 'op\u0000' } }),
      'message',
    ],
    [
      'query-cache data (a key)',
      () => app.request('POST', '/api/v1/cache/query-cache/save', { token: a.token, body: { data: { queries: [{ ['k\u0000']: 1 }] } } }),
      'data.queries.0',
    ],
    [
      'test-connection key',
      () =>
        app.request('POST', `/api/v1/chat-interfaces/${ci.id}/test-connection`, {
          token: a.token,
          body: { endpointUrl: 'https://api.example.com/v1/chat/completions', apiKey: 'sk-\u0000' },
        }),
      'apiKey',
    ],
    ['history sessionId in the query', () => app.request('GET', '/api/v1/chat-messages/history?sessionId=api_%00', { token: a.token }), 'sessionId'],
    ['tRPC input', () => app.request('POST', '/trpc/chatInterfaces.create', { token: a.token, body: { name: 'x\u0000' } }), ''],
  ];
  for (const [name, send, field] of cases) {
    it(name, async () => {
      const res = await send();
      if (name === 'tRPC input') {
        expect(res.status, res.text).toBe(400);
        expect(res.text).toContain('NUL');
        return;
      }
      expectEnvelope(res, 400, field);
      expect(res.body.error.code).toBe('VALIDATION_FAILED');
      expect(res.body.error.details).toMatch(/NUL|surrogate/);
    });
  }

  it('GraphQL arguments too', async () => {
    const res = await app.request('POST', '/graphql', {
      token: a.token,
      body: { query: 'query($id: ID!) { chatInterface(id: $id) { id } }', variables: { id: 'x\u0000' } },
    });
    expect(res.status).toBeLessThan(500);
    expect(res.text).toContain('NUL');
  });

  it('an anonymous caller is told 401 first, never what validation thinks', async () => {
    const res = await app.request('POST', '/api/v1/chat-interfaces', { body: { name: 'x\u0000' } });
    expectEnvelope(res, 401);
  });

  it('astral characters (paired surrogates) are ordinary text', async () => {
    const res = await app.request('PATCH', `/api/v1/chat-interfaces/${ci.id}`, { token: a.token, body: { welcomeMessage: 'Hi 😀' } });
    expect(res.status, res.text).toBe(200);
    expect(res.body.data.chatInterface.welcomeMessage).toBe('Hi 😀');
  });
});

describe('query integers accept decimal digits only', () => {
  it('limit=0x10, 1e1, " 5", -1 and empty are 400; limit=16 works', async () => {
    const session = (await app.request('POST', `/api/v1/chat/${ci.slug}`, { token: key, body: { message: 'hi' } })).body.sessionId ?? 'api_1_x';
    for (const bad of ['0x10', '1e1', '%205', '-1', '', '0b11', '16.0']) {
      const res = await app.request('GET', `/api/v1/chat-messages/history?sessionId=${session}&limit=${bad}`, { token: a.token });
      expectEnvelope(res, 400, 'limit');
    }
    const ok = await app.request('GET', `/api/v1/chat-messages/history?sessionId=${session}&limit=16`, { token: a.token });
    expect([200, 404]).toContain(ok.status);
    expect(ok.status === 200 || ok.body.error.code === 'NOT_FOUND').toBe(true);
  });
});

describe('an over-limit body is answered so that every common client reads the 413', () => {
  const jsonHeaders = () => ({ authorization: `Bearer ${a.token}`, 'content-type': 'application/json' });

  it("Node's https client, still writing a declared 3 MiB JSON body", async () => {
    const res = await streamUpload(
      '/api/v1/chat-interfaces',
      { ...jsonHeaders(), 'content-length': String(3 * 1024 * 1024) },
      3 * 1024 * 1024,
      Buffer.alloc(64 * 1024, 'a'),
    );
    expect(res.status).toBe(413);
    expect(res.body.error.code).toBe('PAYLOAD_TOO_LARGE');
  });

  it("Node's https client, a chunked JSON body that passes the cap while streaming", async () => {
    const res = await streamUpload('/api/v1/chat-interfaces', jsonHeaders(), 3 * 1024 * 1024, Buffer.alloc(64 * 1024, 'a'));
    expect(res.status).toBe(413);
  });

  it("Node's https client, an upload over the free plan's 10 MB", async () => {
    const boundary = 'xyzzy';
    const head = Buffer.from(
      `--${boundary}\r\nContent-Disposition: form-data; name="configId"\r\n\r\n${configId}\r\n--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="big.txt"\r\nContent-Type: text/plain\r\n\r\n`,
    );
    const total = 12 * 1024 * 1024;
    const res = await streamUpload(
      '/api/v1/knowledge-base/documents',
      { authorization: `Bearer ${a.token}`, 'content-type': `multipart/form-data; boundary=${boundary}` },
      total,
      Buffer.alloc(256 * 1024, 'b'),
      head,
    );
    expect(res.status).toBe(413);
  });

  it("Python's requests, which writes the whole body before reading the answer", async () => {
    const script = `
import sys, requests, urllib3
urllib3.disable_warnings()
url, token, kind = sys.argv[1], sys.argv[2], sys.argv[3]
h = {"Authorization": "Bearer " + token}
if kind == "json":
    r = requests.post(url + "/api/v1/chat-interfaces", data=b'{"name":"' + b"a" * (3 * 1024 * 1024) + b'"}', headers={**h, "Content-Type": "application/json"}, verify=False, timeout=60)
else:
    r = requests.post(url + "/api/v1/knowledge-base/documents", files={"file": ("big.txt", b"c" * (12 * 1024 * 1024), "text/plain")}, data={"configId": sys.argv[4]}, headers=h, verify=False, timeout=60)
print(r.status_code, r.json()["error"]["code"])
`;
    for (const kind of ['json', 'upload']) {
      // Asynchronously: the service answers from this very process.
      const run = await promisify(execFile)('python3', ['-c', script, app.url, a.token, kind, configId], { encoding: 'utf8', timeout: 60_000 });
      expect(run.stderr).toBe('');
      expect(run.stdout.trim()).toBe('413 PAYLOAD_TOO_LARGE');
    }
    expect((await health()).status).toBe(200);
  });
});

describe('headers', () => {
  it('authenticated answers are never stored by caches; errors neither', async () => {
    const res = await app.request('GET', '/api/v1/api-keys', { token: a.token });
    expect(res.headers['cache-control']).toBe('no-store');
    expect((await app.request('GET', '/api/v1/api-keys')).headers['cache-control']).toBe('no-store');
  });

  it('the docs page has a strict Content-Security-Policy and cannot be framed', async () => {
    const res = await app.request('GET', '/api/v1/docs');
    expect(res.status).toBe(200);
    const csp = String(res.headers['content-security-policy']);
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("frame-ancestors 'none'");
    expect(csp).toMatch(/script-src 'sha256-[A-Za-z0-9+/=]+'/);
    expect(res.headers['x-frame-options']).toBe('DENY');
    // Every inline script of the page is allowed by its hash, so the policy does not break the page.
    const { createHash } = await import('node:crypto');
    for (const [, script] of res.text.matchAll(/<script>([\s\S]*?)<\/script>/g)) {
      expect(csp).toContain(`'sha256-${createHash('sha256').update(script!).digest('base64')}'`);
    }
  });
});
