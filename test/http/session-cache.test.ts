import { randomBytes } from 'node:crypto';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/test-app.ts';
import { eventually, seenAfterSql } from '../helpers/eventually.ts';

/**
 * Validated owner sessions are cached per instance (routers/auth/session-cache.ts). These tests hold the cache to its
 * promise: a session signed out, revoked or expired, and an owner whose password, role or existence changed, through
 * the API, in SQL, or on another instance, is seen by the very next request.
 */
let app: TestApp;
let peer: TestApp;
const onPostgres = Boolean(process.env.DATABASE_URL);

const me = (on: TestApp, token: string) => on.request('GET', '/api/v1/auth/me', { token });
const listKeys = (on: TestApp, token: string) => on.request('GET', '/api/v1/api-keys', { token });
const adminOwners = (on: TestApp, token: string) => on.request('GET', '/api/v1/admin/owners', { token });

/** Both instances have validated the token and answer from memory. */
async function warm(token: string) {
  for (const on of [app, peer, app, peer]) expect((await listKeys(on, token)).status).toBe(200);
}

beforeAll(async () => {
  app = await startTestApp();
  peer = await app.startPeer();
});

afterAll(async () => {
  await peer?.stop();
  await app?.stop();
});

describe('session cache', () => {
  it('validates a session once, then answers from memory (a change that bypasses the change triggers stays unseen)', async () => {
    const owner = await app.signUp('session-cache-hit');
    expect((await listKeys(app, owner.token)).status).toBe(200);
    const db = app.deps.database.db;
    await sql`alter table sessions disable trigger sessions_deleted`.execute(db);
    try {
      await sql`delete from sessions where owner_id = ${owner.ownerId}::uuid`.execute(db);
      expect((await listKeys(app, owner.token)).status).toBe(200);
    } finally {
      await sql`alter table sessions enable trigger sessions_deleted`.execute(db);
    }
    // The owner changed through the API: the instance that made the change drops the owner's sessions at once.
    const boss = await signUpAdmin();
    expect((await app.request('PATCH', `/api/v1/admin/owners/${owner.ownerId}`, { token: boss.token, body: { plan: 'premium' } })).status).toBe(200);
    expect((await listKeys(app, owner.token)).status).toBe(401);
  });

  it('sign-out takes effect at once, on this instance and on another one', async () => {
    const owner = await app.signUp('session-cache-signout');
    const other = await app.request('POST', '/api/v1/auth/sign-in', { body: { email: owner.email, password: 'correct horse battery' } });
    expect(other.status).toBe(200);
    const second = other.body.data.token as string;
    await warm(owner.token);
    await warm(second);
    expect((await app.request('POST', '/api/v1/auth/sign-out', { token: owner.token })).status).toBe(200);
    expect((await listKeys(app, owner.token)).status).toBe(401);
    await eventually(async () => (await listKeys(peer, owner.token)).status === 401, 'the peer refuses the signed-out session');
    // The owner's other session is untouched.
    expect((await listKeys(app, second)).status).toBe(200);
    expect((await listKeys(peer, second)).status).toBe(200);

    // Signed out on the other instance: refused here too.
    expect((await peer.request('POST', '/api/v1/auth/sign-out', { token: second })).status).toBe(200);
    expect((await listKeys(peer, second)).status).toBe(401);
    await eventually(async () => (await listKeys(app, second)).status === 401, 'this instance refuses the session signed out on the peer');
  });

  it('a session revoked or expired in SQL is refused on the next request, on both instances', async () => {
    const owner = await app.signUp('session-cache-revoke');
    const db = app.deps.database.db;
    await warm(owner.token);
    await sql`delete from sessions where owner_id = ${owner.ownerId}::uuid`.execute(db);
    await seenAfterSql(async () => (await listKeys(app, owner.token)).status === 401, 'the revoked session is refused');
    await eventually(async () => (await listKeys(peer, owner.token)).status === 401, 'the peer refuses the revoked session');

    const expiring = await app.signUp('session-cache-expire');
    await warm(expiring.token);
    await sql`update sessions set expires_at = now() - interval '1 second' where owner_id = ${expiring.ownerId}::uuid`.execute(db);
    await seenAfterSql(async () => (await listKeys(app, expiring.token)).status === 401, 'the expired session is refused');
    await eventually(async () => (await listKeys(peer, expiring.token)).status === 401, 'the peer refuses the expired session');
  });

  it("a password change (the owner's sessions dropped with it) is seen at once, on both instances", async () => {
    const owner = await app.signUp('session-cache-password');
    await warm(owner.token);
    // What a password change does: the new hash and the end of every session, in one transaction.
    await app.deps.database.db.transaction().execute(async (trx) => {
      await sql`update owners set password_hash = ${`changed-${randomBytes(8).toString('hex')}`} where id = ${owner.ownerId}::uuid`.execute(trx);
      await sql`delete from sessions where owner_id = ${owner.ownerId}::uuid`.execute(trx);
    });
    await seenAfterSql(async () => (await listKeys(app, owner.token)).status === 401, 'the session is refused after the password change');
    await eventually(async () => (await listKeys(peer, owner.token)).status === 401, 'the peer refuses it too');
  });

  it('a disabled (deleted) owner is refused at once, on both instances', async () => {
    const owner = await app.signUp('session-cache-deleted');
    await warm(owner.token);
    await sql`delete from owners where id = ${owner.ownerId}::uuid`.execute(app.deps.database.db);
    await seenAfterSql(async () => (await listKeys(app, owner.token)).status === 401, 'the deleted owner is refused');
    await eventually(async () => (await listKeys(peer, owner.token)).status === 401, 'the peer refuses the deleted owner');
  });

  it('a role change is seen on the next request: through the API on one instance, then on the other', async () => {
    const boss = await signUpAdmin();
    const owner = await app.signUp('session-cache-role');
    for (const on of [app, peer]) expect((await adminOwners(on, owner.token)).status).toBe(403);
    const promoted = await app.request('PATCH', `/api/v1/admin/owners/${owner.ownerId}`, { token: boss.token, body: { role: 'admin' } });
    expect(promoted.status, promoted.text).toBe(200);
    expect((await adminOwners(app, owner.token)).status).toBe(200);
    await eventually(async () => (await adminOwners(peer, owner.token)).status === 200, 'the peer sees the promotion');

    // Demoted on the peer: this instance stops serving admin routes to the owner.
    expect((await peer.request('PATCH', `/api/v1/admin/owners/${owner.ownerId}`, { token: boss.token, body: { role: 'owner' } })).status).toBe(200);
    expect((await adminOwners(peer, owner.token)).status).toBe(403);
    await eventually(async () => (await adminOwners(app, owner.token)).status === 403, 'this instance sees the demotion');

    // Changed in SQL, as an operator would: the owner row's trigger carries it.
    await sql`update owners set role = 'admin' where id = ${owner.ownerId}::uuid`.execute(app.deps.database.db);
    await seenAfterSql(async () => (await adminOwners(app, owner.token)).status === 200, 'the SQL promotion is seen');
    await eventually(async () => (await adminOwners(peer, owner.token)).status === 200, 'the peer sees the SQL promotion');
    expect((await me(peer, owner.token)).body.data.owner.role).toBe('admin');
  });

  it("another owner's change leaves a session cached", async () => {
    const owner = await app.signUp('session-cache-bystander');
    const other = await app.signUp('session-cache-other');
    expect((await listKeys(app, owner.token)).status).toBe(200);
    const db = app.deps.database.db;
    await sql`alter table sessions disable trigger sessions_deleted`.execute(db);
    try {
      await sql`delete from sessions where owner_id = ${owner.ownerId}::uuid`.execute(db);
    } finally {
      await sql`alter table sessions enable trigger sessions_deleted`.execute(db);
    }
    expect((await app.request('POST', '/api/v1/auth/sign-out', { token: other.token })).status).toBe(200);
    // Still served from memory: the sign-out named someone else.
    expect((await listKeys(app, owner.token)).status).toBe(200);
    // Emptied with TRUNCATE: nothing is served from memory afterwards.
    await sql`truncate sessions`.execute(db);
    await seenAfterSql(async () => (await listKeys(app, owner.token)).status === 401, 'nothing is served after TRUNCATE');
  });

  it.runIf(onPostgres)('a lost listening connection is noticed and replaced; changes are seen again afterwards', async () => {
    const db = app.deps.database.db;
    const listeners = async () =>
      (
        await sql<{ pid: number }>`select pid from pg_stat_activity where datname = current_database() and query ilike 'listen %session_changes%'`.execute(db)
      ).rows.map((r) => r.pid);
    const before = await listeners();
    expect(before.length).toBe(2); // this app and its peer
    await sql`select pg_terminate_backend(pid) from pg_stat_activity where pid in (${sql.join(before)})`.execute(db);
    await eventually(async () => app.logs.some((l) => l.includes('lost the database connection that listens for session changes')), 'the loss is logged');
    await eventually(async () => (await listeners()).filter((pid) => !before.includes(pid)).length === 2, 'both instances listen again', 5_000);

    const owner = await app.signUp('session-cache-reconnect');
    await warm(owner.token);
    await sql`delete from sessions where owner_id = ${owner.ownerId}::uuid`.execute(db);
    await eventually(async () => (await listKeys(app, owner.token)).status === 401, 'the session is refused after the reconnection');
    await eventually(async () => (await listKeys(peer, owner.token)).status === 401, 'the peer refuses it after the reconnection');
  });
});

/** Promoted in SQL before its token is ever used, so no instance has cached it as an owner. */
async function signUpAdmin() {
  const boss = await app.signUp('session-cache-boss');
  await sql`update owners set role = 'admin' where id = ${boss.ownerId}::uuid`.execute(app.deps.database.db);
  return boss;
}
