import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/test-app.ts';
import { eventually, seenAfterSql } from '../helpers/eventually.ts';

/**
 * Each owner's key list is cached per instance (apiKeyListCache, db/notified-cache.ts). These tests hold it to its
 * promise: whatever changes one of the owner's keys, through the API, through a visitor's chat (lastUsedAt), in SQL,
 * or on another instance, the next list shows it; and one owner's changes never show in another's list.
 */
let app: TestApp;
let peer: TestApp;
let upstream: Server;
let origin: string;
const onPostgres = Boolean(process.env.DATABASE_URL);

type Owner = { token: string; ownerId: string };
type ListedKey = { id: string; name: string; active: boolean; lastUsedAt: string | null; chatInterfaceId: string };

async function makeInterface(owner: Owner, name = 'listed') {
  const ci = await app.request('POST', '/api/v1/chat-interfaces', { token: owner.token, body: { name, endpointUrl: origin, endpointType: 'generic' } });
  expect(ci.status, ci.text).toBe(201);
  return { id: ci.body.data.chatInterface.id as string, slug: ci.body.data.chatInterface.slug as string };
}

async function makeKey(owner: Owner, chatInterfaceId: string, name = 'widget') {
  const key = await app.request('POST', '/api/v1/api-keys', { token: owner.token, body: { name, chatInterfaceId } });
  expect(key.status, key.text).toBe(201);
  return { id: key.body.data.apiKey.id as string, key: key.body.data.key as string };
}

async function list(on: TestApp, owner: Owner): Promise<ListedKey[]> {
  const res = await on.request('GET', '/api/v1/api-keys', { token: owner.token });
  expect(res.status, res.text).toBe(200);
  expect(res.body.data.count).toBe(res.body.data.apiKeys.length);
  return res.body.data.apiKeys;
}

const names = (keys: ListedKey[]) => keys.map((k) => k.name).sort();

beforeAll(async () => {
  upstream = createServer((req, res) => {
    req.resume();
    req.on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ response: 'hello back' })));
  });
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  origin = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
  app = await startTestApp({ OUTBOUND_ALLOW_HOSTS: new URL(origin).host });
  peer = await app.startPeer();
});

afterAll(async () => {
  await peer?.stop();
  await app?.stop();
  upstream?.close();
});

describe('API-key list cache', () => {
  it('is a cache: a change that bypasses the list triggers stays unseen until the next change that notifies', async () => {
    const owner = await app.signUp('list-cache');
    const iface = await makeInterface(owner);
    const key = await makeKey(owner, iface.id, 'before');
    // On PostgreSQL the key's own insert notification arrives asynchronously and could drop the entry listed next.
    if (onPostgres) await new Promise((r) => setTimeout(r, 250));
    expect(names(await list(app, owner))).toEqual(['before']);
    const db = app.deps.database.db;
    await sql`alter table api_keys disable trigger api_keys_listed_changed`.execute(db);
    try {
      await sql`update api_keys set name = 'hidden' where id = ${key.id}::uuid`.execute(db);
      expect(names(await list(app, owner))).toEqual(['before']);
    } finally {
      await sql`alter table api_keys enable trigger api_keys_listed_changed`.execute(db);
    }
    await makeKey(owner, iface.id, 'second');
    expect(names(await list(app, owner))).toEqual(['hidden', 'second']);
  });

  it('shows every change made through the API at once: create, rename, deactivate, delete, interface deleted', async () => {
    const owner = await app.signUp('list-cache-api');
    expect(await list(app, owner)).toEqual([]);
    const iface = await makeInterface(owner);
    const first = await makeKey(owner, iface.id, 'first');
    expect(names(await list(app, owner))).toEqual(['first']);
    const second = await makeKey(owner, iface.id, 'second');
    expect(names(await list(app, owner))).toEqual(['first', 'second']);

    expect((await app.request('PATCH', `/api/v1/api-keys/${first.id}`, { token: owner.token, body: { name: 'renamed', active: false } })).status).toBe(200);
    const renamed = (await list(app, owner)).find((k) => k.id === first.id);
    expect(renamed).toMatchObject({ name: 'renamed', active: false });

    expect((await app.request('DELETE', `/api/v1/api-keys/${second.id}`, { token: owner.token })).status).toBe(200);
    expect(names(await list(app, owner))).toEqual(['renamed']);

    expect((await app.request('DELETE', `/api/v1/chat-interfaces/${iface.id}`, { token: owner.token })).status).toBe(200);
    expect(await list(app, owner)).toEqual([]);
  });

  it("the instance's own writes show at once without waiting for the notification (list triggers off)", async () => {
    const owner = await app.signUp('list-cache-own');
    const iface = await makeInterface(owner);
    const db = app.deps.database.db;
    const triggers = ['api_keys_listed_inserted', 'api_keys_listed_changed', 'api_keys_listed_deleted'];
    for (const trigger of triggers) await sql`alter table api_keys disable trigger ${sql.raw(trigger)}`.execute(db);
    try {
      expect(await list(app, owner)).toEqual([]);
      const key = await makeKey(owner, iface.id, 'created');
      expect(names(await list(app, owner))).toEqual(['created']);
      expect((await app.request('PATCH', `/api/v1/api-keys/${key.id}`, { token: owner.token, body: { name: 'renamed' } })).status).toBe(200);
      expect(names(await list(app, owner))).toEqual(['renamed']);
      const chat = await app.request('POST', `/api/v1/chat/${iface.slug}`, { token: key.key, body: { message: 'hi' } });
      expect(chat.status, chat.text).toBe(200);
      expect((await list(app, owner))[0]!.lastUsedAt).not.toBeNull();
      expect((await app.request('DELETE', `/api/v1/api-keys/${key.id}`, { token: owner.token })).status).toBe(200);
      expect(await list(app, owner)).toEqual([]);
      await makeKey(owner, iface.id, 'goes-with-its-interface');
      expect((await list(app, owner)).length).toBe(1);
      expect((await app.request('DELETE', `/api/v1/chat-interfaces/${iface.id}`, { token: owner.token })).status).toBe(200);
      expect(await list(app, owner)).toEqual([]);
    } finally {
      for (const trigger of triggers) await sql`alter table api_keys enable trigger ${sql.raw(trigger)}`.execute(db);
    }
  });

  it("a visitor's chat with a key shows as its lastUsedAt on the next list", async () => {
    const owner = await app.signUp('list-cache-used');
    const iface = await makeInterface(owner);
    const key = await makeKey(owner, iface.id);
    expect((await list(app, owner))[0]!.lastUsedAt).toBeNull();
    const chat = await app.request('POST', `/api/v1/chat/${iface.slug}`, { token: key.key, body: { message: 'hi' } });
    expect(chat.status, chat.text).toBe(200);
    const used = (await list(app, owner))[0]!.lastUsedAt;
    expect(used).not.toBeNull();
    expect(Math.abs(Date.parse(used!) - Date.now())).toBeLessThan(60_000);
  });

  it('shows changes made in SQL (not through the API), TRUNCATE included', async () => {
    const owner = await app.signUp('list-cache-sql');
    const iface = await makeInterface(owner);
    const key = await makeKey(owner, iface.id, 'from-api');
    expect(names(await list(app, owner))).toEqual(['from-api']);
    const db = app.deps.database.db;
    await sql`update api_keys set name = 'from-sql' where id = ${key.id}::uuid`.execute(db);
    await seenAfterSql(async () => names(await list(app, owner)).join() === 'from-sql', 'the SQL rename is listed');
    await sql`delete from chat_interfaces where id = ${iface.id}::uuid`.execute(db);
    await seenAfterSql(async () => (await list(app, owner)).length === 0, 'the cascade is listed');

    const again = await makeInterface(owner);
    await makeKey(owner, again.id, 'kept-until-truncate');
    expect(names(await list(app, owner))).toEqual(['kept-until-truncate']);
    await sql`truncate api_keys`.execute(db);
    await seenAfterSql(async () => (await list(app, owner)).length === 0, 'the truncation is listed');
  });

  it('another instance shows changes made through this one', async () => {
    const owner = await app.signUp('list-cache-peer');
    const iface = await makeInterface(owner);
    const key = await makeKey(owner, iface.id, 'one');
    expect(names(await list(peer, owner))).toEqual(['one']);
    await makeKey(owner, iface.id, 'two');
    await eventually(async () => names(await list(peer, owner)).join() === 'one,two', 'the peer lists the new key');
    expect((await app.request('PATCH', `/api/v1/api-keys/${key.id}`, { token: owner.token, body: { active: false } })).status).toBe(200);
    await eventually(async () => (await list(peer, owner)).find((k) => k.id === key.id)?.active === false, 'the peer lists the key as inactive');
    expect((await app.request('DELETE', `/api/v1/api-keys/${key.id}`, { token: owner.token })).status).toBe(200);
    await eventually(async () => names(await list(peer, owner)).join() === 'two', 'the peer no longer lists the deleted key');
  });

  it("one owner's changes never reach another's list; another owner's key is a 404 and changes nothing", async () => {
    const alice = await app.signUp('list-cache-alice');
    const bob = await app.signUp('list-cache-bob');
    const aliceKey = await makeKey(alice, (await makeInterface(alice)).id, 'alice-key');
    await makeKey(bob, (await makeInterface(bob)).id, 'bob-key');
    expect(names(await list(app, alice))).toEqual(['alice-key']);
    expect(names(await list(app, bob))).toEqual(['bob-key']);

    for (const [method, body] of [
      ['PATCH', { name: 'taken-over' }],
      ['DELETE', undefined],
    ] as const) {
      const refused = await app.request(method, `/api/v1/api-keys/${aliceKey.id}`, { token: bob.token, body });
      expect(refused.status, refused.text).toBe(404);
      expect(refused.body.error.code).toBe('NOT_FOUND');
    }
    expect(names(await list(app, alice))).toEqual(['alice-key']);
    expect(names(await list(app, bob))).toEqual(['bob-key']);

    // A key moved between owners in SQL leaves one list and joins the other (the notification names both).
    await sql`update api_keys set owner_id = ${bob.ownerId}::uuid where id = ${aliceKey.id}::uuid`.execute(app.deps.database.db);
    await seenAfterSql(async () => (await list(app, alice)).length === 0, "the moved key leaves its old owner's list");
    await seenAfterSql(async () => names(await list(app, bob)).join() === 'alice-key,bob-key', "the moved key joins its new owner's list");

    const anonymous = await app.request('GET', '/api/v1/api-keys');
    expect(anonymous.status).toBe(401);
    expect(anonymous.body.error.code).toBe('UNAUTHORIZED');
  });

  it.runIf(onPostgres)('a lost listening connection is noticed and replaced; changes are listed again afterwards', async () => {
    const db = app.deps.database.db;
    const listeners = async () =>
      (
        await sql<{ pid: number }>`select pid from pg_stat_activity where datname = current_database() and query ilike 'listen %api_key_list_changes%'`.execute(
          db,
        )
      ).rows.map((r) => r.pid);
    const before = await listeners();
    expect(before.length).toBe(2); // this app and its peer
    await sql`select pg_terminate_backend(pid) from pg_stat_activity where pid in (${sql.join(before)})`.execute(db);
    await eventually(async () => app.logs.some((l) => l.includes('listens for API-key list changes')), 'the loss is logged');
    await eventually(async () => (await listeners()).filter((pid) => !before.includes(pid)).length === 2, 'both instances listen again', 5_000);

    const owner = await app.signUp('list-cache-relisten');
    const iface = await makeInterface(owner);
    const key = await makeKey(owner, iface.id, 'before');
    expect(names(await list(app, owner))).toEqual(['before']);
    await sql`update api_keys set name = 'after' where id = ${key.id}::uuid`.execute(db);
    await eventually(async () => names(await list(app, owner)).join() === 'after', 'the SQL rename is listed after the reconnection');
  });
});
