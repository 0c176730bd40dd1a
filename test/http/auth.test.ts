import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/test-app.ts';

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp({ ADMIN_EMAILS: 'boss@example.com' });
});
afterAll(() => app?.stop());

describe('sign-up, sign-in, sessions', () => {
  it('signs up with 201 and returns a token and the owner', async () => {
    const res = await app.request('POST', '/api/v1/auth/sign-up', { body: { email: 'New.Owner@Example.com', password: 'long enough pw', name: 'New Owner' } });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({
      success: true,
      version: 'v1',
      data: { owner: { email: 'new.owner@example.com', name: 'New Owner', plan: 'free', role: 'owner' } },
    });
    expect(res.body.data.token).toMatch(/^[A-Za-z0-9_-]{43}$/);
  });

  it('refuses a duplicate email with 409', async () => {
    const body = { email: 'dup@example.com', password: 'long enough pw' };
    expect((await app.request('POST', '/api/v1/auth/sign-up', { body })).status).toBe(201);
    const again = await app.request('POST', '/api/v1/auth/sign-up', { body: { ...body, email: 'DUP@example.com' } });
    expect(again.status).toBe(409);
    expect(again.body).toEqual({ success: false, error: { message: 'An account with this email already exists', code: 'CONFLICT', details: 'email' } });
  });

  it('validates input and names the field', async () => {
    const res = await app.request('POST', '/api/v1/auth/sign-up', { body: { email: 'not-an-email', password: 'short' } });
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('VALIDATION_FAILED');
    expect(res.body.error.details).toContain('email');
    expect(res.body.error.details).toContain('password');
  });

  it('signs in, and a wrong password or unknown email is 401', async () => {
    const { email } = await app.signUp('signin');
    const ok = await app.request('POST', '/api/v1/auth/sign-in', { body: { email, password: 'correct horse battery' } });
    expect(ok.status).toBe(200);
    expect(ok.body.data.owner.email).toBe(email);
    const wrong = await app.request('POST', '/api/v1/auth/sign-in', { body: { email, password: 'incorrect horse' } });
    expect(wrong.status).toBe(401);
    expect(wrong.body.error).toMatchObject({ code: 'UNAUTHORIZED', message: 'Invalid email or password' });
    const unknown = await app.request('POST', '/api/v1/auth/sign-in', { body: { email: 'nobody@example.com', password: 'whatever1' } });
    expect(unknown.status).toBe(401);
  });

  it('stores only the SHA-256 of the session token', async () => {
    const { token, ownerId } = await app.signUp('hash');
    const rows = await app.deps.database.db.selectFrom('sessions').select('id').where('owner_id', '=', ownerId).execute();
    expect(rows).toHaveLength(1);
    const { createHash } = await import('node:crypto');
    expect(rows[0]!.id).toBe(createHash('sha256').update(token).digest('hex'));
    expect(rows[0]!.id).not.toContain(token);
  });

  it('me returns the owner; sign-out invalidates the token at once', async () => {
    const { token, email } = await app.signUp('me');
    const me = await app.request('GET', '/api/v1/auth/me', { token });
    expect(me.status).toBe(200);
    expect(me.body.data.owner).toMatchObject({ email, tourCompletedAt: null });
    expect((await app.request('POST', '/api/v1/auth/sign-out', { token })).body).toEqual({ success: true, data: { signedOut: true }, version: 'v1' });
    const after = await app.request('GET', '/api/v1/auth/me', { token });
    expect(after.status).toBe(401);
    expect(after.body.error.code).toBe('UNAUTHORIZED');
  });

  it('missing and malformed tokens are 401 with the envelope', async () => {
    const none = await app.request('GET', '/api/v1/auth/me');
    expect(none.status).toBe(401);
    expect(none.body).toEqual({ success: false, error: { message: 'Authentication required', code: 'UNAUTHORIZED', details: expect.any(String) } });
    for (const header of ['Basic abc', 'Bearer', 'Bearer short', `Bearer ${'x'.repeat(43)}`]) {
      const res = await app.request('GET', '/api/v1/auth/me', { headers: { authorization: header } });
      expect(res.status, header).toBe(401);
    }
  });
});

describe('roles and plans', () => {
  it('ADMIN_EMAILS makes an admin at sign-up; admins list and change owners; others get 403', async () => {
    const admin = await app.request('POST', '/api/v1/auth/sign-up', { body: { email: 'boss@example.com', password: 'long enough pw' } });
    expect(admin.body.data.owner.role).toBe('admin');
    const adminToken = admin.body.data.token as string;
    const plain = await app.signUp('plain');

    expect((await app.request('GET', '/api/v1/admin/owners', { token: plain.token })).status).toBe(403);
    expect((await app.request('PATCH', `/api/v1/admin/owners/${plain.ownerId}`, { token: plain.token, body: { plan: 'enterprise' } })).status).toBe(403);
    expect((await app.request('GET', '/api/v1/admin/owners')).status).toBe(401);

    const list = await app.request('GET', '/api/v1/admin/owners?limit=500', { token: adminToken });
    expect(list.status).toBe(400);
    const page = await app.request('GET', '/api/v1/admin/owners?limit=2&offset=0', { token: adminToken });
    expect(page.status).toBe(200);
    expect(page.body.data.owners).toHaveLength(2);
    expect(page.body.data.total).toBeGreaterThanOrEqual(3);

    const patched = await app.request('PATCH', `/api/v1/admin/owners/${plain.ownerId}`, { token: adminToken, body: { plan: 'enterprise' } });
    expect(patched.status).toBe(200);
    expect(patched.body.data.owner).toMatchObject({ id: plain.ownerId, plan: 'enterprise', role: 'owner' });
    expect((await app.request('GET', '/api/v1/auth/me', { token: plain.token })).body.data.owner.plan).toBe('enterprise');

    const filtered = await app.request('GET', '/api/v1/admin/owners?plan=enterprise', { token: adminToken });
    expect(filtered.body.data.owners.map((o: { id: string }) => o.id)).toContain(plain.ownerId);

    expect((await app.request('PATCH', `/api/v1/admin/owners/${plain.ownerId}`, { token: adminToken, body: { plan: 'gold' } })).status).toBe(400);
    expect((await app.request('PATCH', `/api/v1/admin/owners/${plain.ownerId}`, { token: adminToken, body: {} })).status).toBe(400);
    const missing = await app.request('PATCH', '/api/v1/admin/owners/00000000-0000-0000-0000-000000000000', { token: adminToken, body: { role: 'admin' } });
    expect(missing.status).toBe(404);
  });
});
