import { request as httpsRequest } from 'node:https';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { insecureAgent, startTestApp, type TestApp, type TestResponse } from '../helpers/test-app.ts';

let app: TestApp;
let a: { token: string };
let b: { token: string };

beforeAll(async () => {
  app = await startTestApp({ OUTBOUND_ALLOW_HOSTS: '127.0.0.1:9' });
  a = await app.signUp('a');
  b = await app.signUp('b');
});
afterAll(() => app?.stop());

const create = (token: string, body: Record<string, unknown>) => app.request('POST', '/api/v1/chat-interfaces', { token, body });

function multipart(
  path: string,
  token: string,
  file: { name: string; type: string; bytes: Buffer } | null,
  extra: Buffer = Buffer.alloc(0),
): Promise<TestResponse> {
  const boundary = '----cis' + Math.random().toString(16).slice(2);
  const parts: Buffer[] = [];
  if (file) {
    parts.push(Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="${file.name}"\r\nContent-Type: ${file.type}\r\n\r\n`));
    parts.push(file.bytes, extra, Buffer.from('\r\n'));
  }
  parts.push(Buffer.from(`--${boundary}--\r\n`));
  const body = Buffer.concat(parts);
  return new Promise((resolve, reject) => {
    const req = httpsRequest(
      new URL(path, app.url),
      {
        method: 'POST',
        agent: insecureAgent,
        headers: { authorization: `Bearer ${token}`, 'content-type': `multipart/form-data; boundary=${boundary}`, 'content-length': body.length },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString();
          resolve({ status: res.statusCode ?? 0, headers: res.headers, text, body: JSON.parse(text) });
        });
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

describe('chat interfaces', () => {
  it('creates with 201, derives a slug, stores the upstream key encrypted and never returns it', async () => {
    const res = await create(a.token, {
      name: 'Ask Ünïcode Shop!',
      endpointUrl: 'http://127.0.0.1:9/v1/chat/completions',
      apiKey: 'sk-upstream-secret-123456',
      welcomeMessage: 'Hi!',
      primaryColor: '#112233',
    });
    expect(res.status).toBe(201);
    const ci = res.body.data.chatInterface;
    expect(ci).toMatchObject({
      name: 'Ask Ünïcode Shop!',
      hasApiKey: true,
      endpointUrl: 'http://127.0.0.1:9/v1/chat/completions',
      welcomeMessage: 'Hi!',
      primaryColor: '#112233',
      avatarUrl: null,
      configId: null,
    });
    expect(ci.slug).toMatch(/^ask-unicode-shop-[0-9a-f]{8}$/);
    expect(res.text).not.toContain('sk-upstream-secret');
    const row = await app.deps.database.db.selectFrom('chat_interfaces').select('endpoint_api_key_enc').where('id', '=', ci.id).executeTakeFirstOrThrow();
    expect(row.endpoint_api_key_enc).toMatch(/^v1\./);
    expect(row.endpoint_api_key_enc).not.toContain('sk-upstream');
    expect(app.deps.secrets.open(row.endpoint_api_key_enc!)).toBe('sk-upstream-secret-123456');

    const debug = await app.request('GET', '/api/v1/debug/chat-interfaces', { token: a.token });
    expect(debug.status).toBe(200);
    const entry = debug.body.data.chatInterfaces.find((c: { id: string }) => c.id === ci.id);
    expect(entry.resolved).toMatchObject({ backend: 'external-endpoint', endpointHost: '127.0.0.1:9', endpointTypeSource: 'detected', apiKeyReadable: true });
    expect(entry.resolved.apiKeyMasked).toMatch(/^sk-\*+3456$/);
    expect(debug.text).not.toContain('upstream-secret');
  });

  it('refuses a duplicate slug with 409, across owners too', async () => {
    expect((await create(a.token, { name: 'One', slug: 'acme-help' })).status).toBe(201);
    const dup = await create(b.token, { name: 'Two', slug: 'acme-help' });
    expect(dup.status).toBe(409);
    expect(dup.body.error).toMatchObject({ code: 'CONFLICT', message: 'Slug already in use' });
    const other = (await create(a.token, { name: 'Three', slug: 'acme-other' })).body.data.chatInterface.id;
    const patch = await app.request('PATCH', `/api/v1/chat-interfaces/${other}`, { token: a.token, body: { slug: 'acme-help' } });
    expect(patch.status).toBe(409);
  });

  it('validates fields and names them', async () => {
    const cases: Array<[Record<string, unknown>, string]> = [
      [{}, 'name'],
      [{ name: 'x', slug: 'No Spaces' }, 'slug'],
      [{ name: 'x', primaryColor: 'red' }, 'primaryColor'],
      [{ name: 'x', endpointUrl: 'ftp://example.com' }, 'endpointUrl'],
      [{ name: 'x', endpointType: 'soap' }, 'endpointType'],
      [{ name: 'x'.repeat(101) }, 'name'],
      // A key no HTTP header can carry would fail every chat as if the endpoint were unreachable.
      [{ name: 'x', apiKey: 'abc\u0001def' }, 'apiKey: must hold only characters an HTTP header can carry'],
      [{ name: 'x', apiKey: 'key-\u20ac' }, 'apiKey: must hold only characters an HTTP header can carry'],
    ];
    for (const [body, field] of cases) {
      const res = await create(a.token, body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body.error.details).toContain(field);
    }
  });

  it('refuses endpoint URLs that point into private networks (400)', async () => {
    for (const url of ['http://127.0.0.1:8080/x', 'http://169.254.169.254/latest', 'http://[::1]/x', 'http://2130706433/x', 'http://10.0.0.5/api']) {
      const res = await create(a.token, { name: 'ssrf', endpointUrl: url });
      expect(res.status, url).toBe(400);
      expect(res.body.error.details).toContain('endpointUrl');
    }
  });

  it('reads, updates partially and deletes; another owner gets 404 everywhere', async () => {
    const ci = (await create(a.token, { name: 'Mine', apiKey: 'secret-one-abcdef' })).body.data.chatInterface;
    for (const [method, body] of [['GET'], ['PATCH', { name: 'Hijack' }], ['DELETE']] as const) {
      const res = await app.request(method, `/api/v1/chat-interfaces/${ci.id}`, { token: b.token, body });
      expect(res.status, method).toBe(404);
      expect(res.body.error.message).toBe('Chat interface not found');
    }
    expect((await app.request('GET', '/api/v1/chat-interfaces', { token: b.token })).body.data.chatInterfaces.map((c: { id: string }) => c.id)).not.toContain(
      ci.id,
    );

    const patched = await app.request('PATCH', `/api/v1/chat-interfaces/${ci.id}`, { token: a.token, body: { welcomeMessage: 'Hello there' } });
    expect(patched.status).toBe(200);
    expect(patched.body.data.chatInterface).toMatchObject({ name: 'Mine', welcomeMessage: 'Hello there', hasApiKey: true });
    const cleared = await app.request('PATCH', `/api/v1/chat-interfaces/${ci.id}`, { token: a.token, body: { apiKey: null, welcomeMessage: null } });
    expect(cleared.body.data.chatInterface).toMatchObject({ hasApiKey: false, welcomeMessage: null });

    const got = await app.request('GET', `/api/v1/chat-interfaces/${ci.id}`, { token: a.token });
    expect(got.body.data.chatInterface.welcomeMessage).toBeNull();
    expect((await app.request('DELETE', `/api/v1/chat-interfaces/${ci.id}`, { token: a.token })).status).toBe(200);
    expect((await app.request('GET', `/api/v1/chat-interfaces/${ci.id}`, { token: a.token })).status).toBe(404);
    expect((await app.request('GET', '/api/v1/chat-interfaces/not-a-uuid', { token: a.token })).status).toBe(404);
  });

  it("answers 404 for a configId that is not the caller's knowledge base, and stores its own in canonical form", async () => {
    const config = async (token: string) =>
      (await app.request('POST', '/api/v1/knowledge-base/configs', { token, body: { name: 'kb' } })).body.data.config.id as string;
    const mine = await config(a.token);
    const theirs = await config(b.token);
    const own = (await create(a.token, { name: 'Own config', configId: mine.toUpperCase() })).body.data.chatInterface;
    expect(own.configId).toBe(mine);
    for (const configId of [theirs, '7d1c3a8e-95f1-4d8e-bb0e-4c61f2b0a9d3', 'not-an-id']) {
      const created = await create(a.token, { name: 'Foreign config', configId });
      expect(created.status, configId).toBe(404);
      expect(created.body.error).toMatchObject({ code: 'NOT_FOUND', message: 'Knowledge base configuration not found' });
      const patched = await app.request('PATCH', `/api/v1/chat-interfaces/${own.id}`, { token: a.token, body: { configId } });
      expect(patched.status, configId).toBe(404);
      expect(patched.body.error.message).toBe('Knowledge base configuration not found');
    }
    expect((await app.request('GET', `/api/v1/chat-interfaces/${own.id}`, { token: a.token })).body.data.chatInterface.configId).toBe(mine);
  });

  it('deleting a knowledge base detaches it from the interfaces that answered from it', async () => {
    const kb = (await app.request('POST', '/api/v1/knowledge-base/configs', { token: a.token, body: { name: 'doomed' } })).body.data.config.id;
    const other = (await app.request('POST', '/api/v1/knowledge-base/configs', { token: a.token, body: { name: 'kept' } })).body.data.config.id;
    const attached = (await create(a.token, { name: 'Attached', configId: kb })).body.data.chatInterface.id;
    const elsewhere = (await create(a.token, { name: 'Elsewhere', configId: other })).body.data.chatInterface.id;
    expect((await app.request('DELETE', `/api/v1/knowledge-base/configs/${kb}`, { token: a.token })).status).toBe(200);
    expect((await app.request('GET', `/api/v1/chat-interfaces/${attached}`, { token: a.token })).body.data.chatInterface.configId).toBeNull();
    expect((await app.request('GET', `/api/v1/chat-interfaces/${elsewhere}`, { token: a.token })).body.data.chatInterface.configId).toBe(other);
  });

  it('uploads an avatar: resized to 256x256 WebP with EXIF stripped, served publicly', async () => {
    const ci = (await create(a.token, { name: 'With avatar' })).body.data.chatInterface;
    const photo = await sharp({ create: { width: 800, height: 600, channels: 3, background: '#3366cc' } })
      .jpeg()
      .withMetadata({ exif: { IFD0: { Copyright: 'secret-owner-exif', Artist: 'Someone' } } })
      .toBuffer();
    expect((await sharp(photo).metadata()).exif).toBeDefined();

    const res = await multipart(`/api/v1/chat-interfaces/${ci.id}/avatar`, a.token, { name: 'me.jpg', type: 'image/jpeg', bytes: photo });
    expect(res.status).toBe(200);
    const avatarUrl = res.body.data.chatInterface.avatarUrl as string;
    expect(avatarUrl).toBe(`/api/v1/chat-interfaces/${ci.id}/avatar?v=1`);

    const image = await new Promise<{ status: number; type?: string; bytes: Buffer }>((resolve, reject) => {
      httpsRequest(new URL(avatarUrl, app.url), { agent: insecureAgent }, (r) => {
        const chunks: Buffer[] = [];
        r.on('data', (c: Buffer) => chunks.push(c));
        r.on('end', () => resolve({ status: r.statusCode ?? 0, type: r.headers['content-type'], bytes: Buffer.concat(chunks) }));
      })
        .on('error', reject)
        .end();
    });
    expect(image.status).toBe(200);
    expect(image.type).toBe('image/webp');
    const meta = await sharp(image.bytes).metadata();
    expect(meta).toMatchObject({ format: 'webp', width: 256, height: 256 });
    expect(meta.exif).toBeUndefined();
    expect(image.bytes.includes(Buffer.from('secret-owner-exif'))).toBe(false);

    expect((await multipart(`/api/v1/chat-interfaces/${ci.id}/avatar`, b.token, { name: 'x.jpg', type: 'image/jpeg', bytes: photo })).status).toBe(404);
    const notImage = await multipart(`/api/v1/chat-interfaces/${ci.id}/avatar`, a.token, {
      name: 'x.png',
      type: 'image/png',
      bytes: Buffer.from('definitely not a png'),
    });
    expect(notImage.status).toBe(415);
    const empty = await multipart(`/api/v1/chat-interfaces/${ci.id}/avatar`, a.token, { name: 'x.png', type: 'image/png', bytes: Buffer.alloc(0) });
    expect(empty.status, empty.text).toBe(415);
    // sharp can render SVG, but an avatar is one of the raster formats the error names.
    const svg = await multipart(`/api/v1/chat-interfaces/${ci.id}/avatar`, a.token, {
      name: 'x.svg',
      type: 'image/svg+xml',
      bytes: Buffer.from('<svg xmlns="http://www.w3.org/2000/svg" width="64" height="64"><rect width="64" height="64" fill="red"/></svg>'),
    });
    expect(svg.status, svg.text).toBe(415);
    const noFile = await multipart(`/api/v1/chat-interfaces/${ci.id}/avatar`, a.token, null);
    expect(noFile.status).toBe(400);
    expect(noFile.body.error.details).toContain('file');
    const tooBig = await multipart(
      `/api/v1/chat-interfaces/${ci.id}/avatar`,
      a.token,
      { name: 'big.jpg', type: 'image/jpeg', bytes: photo },
      Buffer.alloc(6 * 1024 * 1024),
    );
    expect(tooBig.status).toBe(413);
    expect(tooBig.body.error.code).toBe('PAYLOAD_TOO_LARGE');
    const json = await app.request('POST', `/api/v1/chat-interfaces/${ci.id}/avatar`, { token: a.token, body: { file: 'x' } });
    expect(json.status).toBe(415);
    expect((await app.request('GET', `/api/v1/chat-interfaces/${ci.id}/avatar`)).status).toBe(200);
    const none = (await create(a.token, { name: 'No avatar' })).body.data.chatInterface.id;
    expect((await app.request('GET', `/api/v1/chat-interfaces/${none}/avatar`)).status).toBe(404);
  });
});
