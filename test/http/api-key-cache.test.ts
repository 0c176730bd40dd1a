import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/test-app.ts';
import { eventually } from '../helpers/eventually.ts';

/**
 * Validated API keys are cached per instance (routers/api-keys/key-cache.ts). These tests hold the cache to its
 * promise: whatever changes a key or its interface, through the API, in SQL, or on another instance, the next
 * request sees it.
 */
let app: TestApp;
let peer: TestApp;
let owner: { token: string };
const upstreams: Server[] = [];
const origins: string[] = [];
const onPostgres = Boolean(process.env.DATABASE_URL);

async function startUpstream(name: string) {
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ response: `answered by ${name}` })));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  upstreams.push(server);
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

async function makeInterface(endpointUrl: string) {
  const ci = await app.request('POST', '/api/v1/chat-interfaces', { token: owner.token, body: { name: 'cached', endpointUrl, endpointType: 'generic' } });
  expect(ci.status, ci.text).toBe(201);
  const key = await app.request('POST', '/api/v1/api-keys', { token: owner.token, body: { name: 'widget', chatInterfaceId: ci.body.data.chatInterface.id } });
  expect(key.status, key.text).toBe(201);
  return {
    id: ci.body.data.chatInterface.id as string,
    slug: ci.body.data.chatInterface.slug as string,
    key: key.body.data.key as string,
    keyId: key.body.data.apiKey.id as string,
  };
}

const chat = (on: TestApp, slug: string, key: string) => on.request('POST', `/api/v1/chat/${slug}`, { token: key, body: { message: 'hello' } });

beforeAll(async () => {
  origins.push(await startUpstream('first'), await startUpstream('second'));
  const allow = origins.map((o) => new URL(o).host).join(',');
  app = await startTestApp({ OUTBOUND_ALLOW_HOSTS: allow });
  peer = await app.startPeer();
  owner = await app.signUp('key-cache');
});

afterAll(async () => {
  await peer?.stop();
  await app?.stop();
  for (const server of upstreams) server.close();
});

describe('API-key cache', () => {
  it('looks a key up once, then answers from memory (a change that bypasses the change triggers stays unseen)', async () => {
    const iface = await makeInterface(origins[0]!);
    expect((await chat(app, iface.slug, iface.key)).status).toBe(200);
    const db = app.deps.database.db;
    await sql`alter table api_keys disable trigger api_keys_changed`.execute(db);
    try {
      await sql`update api_keys set active = false where id = ${iface.keyId}::uuid`.execute(db);
      expect((await chat(app, iface.slug, iface.key)).status).toBe(200);
    } finally {
      await sql`alter table api_keys enable trigger api_keys_changed`.execute(db);
    }
    // Any change made through the API empties the cache of the instance that made it at once.
    await app.request('PATCH', `/api/v1/api-keys/${iface.keyId}`, { token: owner.token, body: { name: 'renamed' } });
    expect((await chat(app, iface.slug, iface.key)).status).toBe(401);
  });

  it('a key deactivated in SQL (not through the API) is refused on the next request', async () => {
    const iface = await makeInterface(origins[0]!);
    expect((await chat(app, iface.slug, iface.key)).status).toBe(200);
    await sql`update api_keys set active = false where id = ${iface.keyId}::uuid`.execute(app.deps.database.db);
    // PGlite delivers the notification before the update returns; PostgreSQL on commit, to the listening connection.
    if (onPostgres) await eventually(async () => (await chat(app, iface.slug, iface.key)).status === 401, 'the key is refused');
    else expect((await chat(app, iface.slug, iface.key)).status).toBe(401);
  });

  it('the next chat uses the interface as it is now: new endpoint, new slug, deleted', async () => {
    const iface = await makeInterface(origins[0]!);
    expect((await chat(app, iface.slug, iface.key)).body.message).toBe('answered by first');
    const moved = await app.request('PATCH', `/api/v1/chat-interfaces/${iface.id}`, { token: owner.token, body: { endpointUrl: origins[1] } });
    expect(moved.status, moved.text).toBe(200);
    expect((await chat(app, iface.slug, iface.key)).body.message).toBe('answered by second');

    const renamed = await app.request('PATCH', `/api/v1/chat-interfaces/${iface.id}`, { token: owner.token, body: { slug: `${iface.slug}-new` } });
    expect(renamed.status, renamed.text).toBe(200);
    expect((await chat(app, iface.slug, iface.key)).status).toBe(404);
    expect((await chat(app, `${iface.slug}-new`, iface.key)).status).toBe(200);

    expect((await app.request('DELETE', `/api/v1/chat-interfaces/${iface.id}`, { token: owner.token })).status).toBe(200);
    expect((await chat(app, `${iface.slug}-new`, iface.key)).status).toBe(401);
  });

  it('another instance refuses a key deactivated through this one, and accepts it again when reactivated', async () => {
    const iface = await makeInterface(origins[0]!);
    expect((await chat(peer, iface.slug, iface.key)).status).toBe(200);
    expect((await app.request('PATCH', `/api/v1/api-keys/${iface.keyId}`, { token: owner.token, body: { active: false } })).status).toBe(200);
    await eventually(async () => (await chat(peer, iface.slug, iface.key)).status === 401, 'the peer refuses the key');
    expect((await app.request('PATCH', `/api/v1/api-keys/${iface.keyId}`, { token: owner.token, body: { active: true } })).status).toBe(200);
    await eventually(async () => (await chat(peer, iface.slug, iface.key)).status === 200, 'the peer accepts the key again');
    expect((await app.request('DELETE', `/api/v1/api-keys/${iface.keyId}`, { token: owner.token })).status).toBe(200);
    await eventually(async () => (await chat(peer, iface.slug, iface.key)).status === 401, 'the peer refuses the deleted key');
  });

  it('the changes that empty the cache need the owner: 401 without a session, 400 on bad input, 404 for another owner', async () => {
    const iface = await makeInterface(origins[0]!);
    const other = await app.signUp('key-cache-other');
    const ops: Array<[string, string, Record<string, unknown> | undefined]> = [
      ['PATCH', `/api/v1/api-keys/${iface.keyId}`, { active: false }],
      ['DELETE', `/api/v1/api-keys/${iface.keyId}`, undefined],
      ['PATCH', `/api/v1/chat-interfaces/${iface.id}`, { endpointUrl: origins[1] }],
      ['DELETE', `/api/v1/chat-interfaces/${iface.id}`, undefined],
    ];
    for (const [method, path, body] of ops) {
      const anonymous = await app.request(method, path, { body });
      expect(anonymous.status, `${method} ${path}`).toBe(401);
      expect(anonymous.body.error.code).toBe('UNAUTHORIZED');
      expect((await app.request(method, path, { body, token: 'svc_not-a-real-key' })).status, `${method} ${path}`).toBe(401);
      expect((await app.request(method, path, { body, token: other.token })).status, `${method} ${path}`).toBe(404);
    }
    const badKey = await app.request('PATCH', `/api/v1/api-keys/${iface.keyId}`, { token: owner.token, body: { active: 'no' } });
    expect(badKey.status).toBe(400);
    expect(badKey.body.error.details).toContain('active');
    const badInterface = await app.request('PATCH', `/api/v1/chat-interfaces/${iface.id}`, { token: owner.token, body: { slug: 'NO SPACES' } });
    expect(badInterface.status).toBe(400);
    expect(badInterface.body.error.details).toContain('slug');
    // None of the refused calls changed anything: the key still answers.
    expect((await chat(app, iface.slug, iface.key)).body.message).toBe('answered by first');
  });

  it('keys emptied out with TRUNCATE are refused on the next request', async () => {
    const iface = await makeInterface(origins[0]!);
    expect((await chat(app, iface.slug, iface.key)).status).toBe(200);
    await sql`truncate api_keys`.execute(app.deps.database.db);
    if (onPostgres) await eventually(async () => (await chat(app, iface.slug, iface.key)).status === 401, 'the key is refused');
    else expect((await chat(app, iface.slug, iface.key)).status).toBe(401);
  });

  it.runIf(onPostgres)('a lost listening connection is noticed and replaced; changes are seen again afterwards', async () => {
    const db = app.deps.database.db;
    const listeners = async () =>
      (
        await sql<{ pid: number }>`select pid from pg_stat_activity where datname = current_database() and query ilike 'listen %api_key_changes%'`.execute(db)
      ).rows.map((r) => r.pid);
    const before = await listeners();
    expect(before.length).toBe(2); // this app and its peer
    await sql`select pg_terminate_backend(pid) from pg_stat_activity where pid in (${sql.join(before)})`.execute(db);
    await eventually(async () => app.logs.some((l) => l.includes('lost the database connection that listens for API-key changes')), 'the loss is logged');
    await eventually(async () => (await listeners()).filter((pid) => !before.includes(pid)).length === 2, 'both instances listen again', 5_000);

    const iface = await makeInterface(origins[0]!);
    expect((await chat(app, iface.slug, iface.key)).status).toBe(200);
    await sql`update api_keys set active = false where id = ${iface.keyId}::uuid`.execute(db);
    await eventually(async () => (await chat(app, iface.slug, iface.key)).status === 401, 'the key is refused after the reconnection');
  });
});
