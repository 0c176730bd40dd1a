import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/test-app.ts';

/**
 * A resume token is a long-lived secret kept in a browser: unused for VISITOR_RESUME_IDLE_DAYS it no longer resumes
 * its visitor (a new visitor starts), and each use slides the window.
 */

let app: TestApp;
let slug: string;

beforeAll(async () => {
  app = await startTestApp({ VISITOR_RESUME_IDLE_DAYS: '30' });
  const owner = await app.signUp('resume-expiry');
  const created = await app.request('POST', '/api/v1/chat-interfaces', { token: owner.token, body: { name: 'Resumable', public: true } });
  expect(created.status, created.text).toBe(201);
  slug = created.body.data.chatInterface.slug;
});
afterAll(() => app?.stop());

const startVisitor = (body: Record<string, unknown> = {}) => app.request('POST', `/api/v1/chat/${slug}/visitor-sessions`, { body });

describe('resume tokens expire when left unused', () => {
  it('resumes within the idle window (and slides it), starts a new visitor past it', async () => {
    const first = await startVisitor();
    expect(first.status, first.text).toBe(201);
    const { visitorId, resumeToken } = first.body.data as { visitorId: string; resumeToken: string };
    const lastSeenDaysAgo = (days: number) =>
      sql`update visitors set last_seen_at = now() - make_interval(days => ${days}) where id = ${visitorId}`.execute(app.deps.database.db);

    await lastSeenDaysAgo(29);
    const resumed = await startVisitor({ resumeToken });
    expect(resumed.status, resumed.text).toBe(200);
    expect(resumed.body.data).toMatchObject({ visitorId, resumeToken: null });
    // The use above moved the window: 29 more days are still within it.
    const seen = await sql<{ recent: boolean }>`select last_seen_at > now() - interval '1 minute' as recent from visitors where id = ${visitorId}`.execute(
      app.deps.database.db,
    );
    expect(seen.rows[0]?.recent).toBe(true);

    await lastSeenDaysAgo(31);
    const expired = await startVisitor({ resumeToken });
    expect(expired.status, expired.text).toBe(201);
    expect(expired.body.data.visitorId).not.toBe(visitorId);
    expect(expired.body.data.resumeToken).toMatch(/^vrt_/);
  });
});
