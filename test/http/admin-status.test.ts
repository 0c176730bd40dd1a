import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/test-app.ts';

/** GET /api/v1/admin/status through the listener: admins only, and figures that follow what is stored. */

let app: TestApp;
let admin: { token: string; ownerId: string };
let owner: { token: string; ownerId: string };

beforeAll(async () => {
  // No background workers: queued jobs stay queued, so the figures are what this test put there.
  app = await startTestApp({ JOB_CONCURRENCY: '0', WEBHOOK_CONCURRENCY: '0' });
  admin = await app.signUp('status-admin');
  owner = await app.signUp('status-owner');
  await app.deps.database.db.updateTable('owners').set({ role: 'admin' }).where('id', '=', admin.ownerId).execute();
});
afterAll(async () => {
  await app?.stop();
});

describe('admin status', () => {
  it('reports the stores’ health, jobs per kind, the webhook backlog, version and uptime', async () => {
    await app.deps.jobs.enqueue('status.probe', { n: 1 }, { runAt: new Date(Date.now() - 5_000) });
    await app.deps.jobs.enqueue('status.probe', { n: 2 });
    const res = await app.request('GET', '/api/v1/admin/status', { token: admin.token });
    expect(res.status, res.text).toBe(200);
    const status = res.body.data;
    expect(status.version).toMatch(/^\d+\.\d+\.\d+/);
    expect(status.uptimeSeconds).toBeGreaterThanOrEqual(0);
    expect(status.database).toMatchObject({ ok: true, error: null, kind: expect.stringMatching(/^(pglite|postgres)$/) });
    expect(status.database.latencyMs).toBeGreaterThanOrEqual(0);
    expect(status.rateLimitStore).toMatchObject({ ok: true, store: process.env.REDIS_URL ? 'redis' : 'memory' });
    const probe = status.jobs.find((j: { kind: string }) => j.kind === 'status.probe');
    expect(probe).toMatchObject({ queued: 2, running: 0, dead: 0 });
    expect(probe.oldestReadySeconds).toBeGreaterThanOrEqual(4);
    expect(status.webhooks).toEqual({ pendingDeliveries: 0, oldestPendingSeconds: null });
    expect(Array.isArray(status.instances)).toBe(true);
  });

  it('is for admins: 403 for an owner, 401 without a session', async () => {
    expect((await app.request('GET', '/api/v1/admin/status', { token: owner.token })).status).toBe(403);
    expect((await app.request('GET', '/api/v1/admin/status')).status).toBe(401);
  });
});
