import parsePrometheusTextFormat from 'parse-prometheus-text-format';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/test-app.ts';

/**
 * GET /metrics: Prometheus text, read by a real parser; protected by METRICS_TOKEN; labels carry route templates,
 * never ids, keys or addresses.
 */

const TOKEN = 'metrics-token-0123456789abcdef';
let app: TestApp;
let owner: { token: string; ownerId: string };

beforeAll(async () => {
  app = await startTestApp({ METRICS_TOKEN: TOKEN });
  owner = await app.signUp('metrics');
});
afterAll(async () => {
  await app?.stop();
});

describe('/metrics', () => {
  it('needs the token, and reports request durations by route template, job queue depth and webhook outcomes', async () => {
    const created = await app.request('POST', '/api/v1/chat-interfaces', {
      token: owner.token,
      body: { name: 'Metered', endpointUrl: 'https://example.com/bot' },
    });
    const id = created.body.data.chatInterface.id;
    expect((await app.request('GET', `/api/v1/chat-interfaces/${id}`, { token: owner.token })).status).toBe(200);
    expect((await app.request('GET', '/api/v1/chat-interfaces/00000000-0000-4000-8000-000000000000', { token: owner.token })).status).toBe(404);
    await app.request('GET', '/api/v1/no-such-route');

    expect((await app.request('GET', '/metrics')).status).toBe(401);
    expect((await app.request('GET', '/metrics', { headers: { authorization: 'Bearer wrong' } })).status).toBe(401);
    // The scheme is case-insensitive (RFC 9110), as for every other bearer credential here; an empty token is no token.
    expect((await app.request('GET', '/metrics', { headers: { authorization: `bearer  ${TOKEN}` } })).status).toBe(200);
    expect((await app.request('GET', '/metrics', { headers: { authorization: 'Bearer ' } })).status).toBe(401);
    const res = await app.request('GET', '/metrics', { headers: { authorization: `Bearer ${TOKEN}` } });
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toContain('text/plain');
    const families = parsePrometheusTextFormat(res.text);
    const byName = Object.fromEntries(families.map((f) => [f.name, f]));
    expect(byName.http_request_duration_seconds!.type).toBe('HISTOGRAM');
    // The parser folds a histogram's labelled series into its buckets, so the series are read from their _count lines.
    const counts = new Map(
      res.text
        .split('\n')
        .filter((line) => line.startsWith('http_request_duration_seconds_count{'))
        .map((line) => [line.slice(line.indexOf('{'), line.lastIndexOf('}') + 1), Number(line.slice(line.lastIndexOf(' ') + 1))]),
    );
    expect(counts.get('{method="GET",route="/api/v1/chat-interfaces/{id}",status="200"}')).toBeGreaterThanOrEqual(1);
    expect(counts.get('{method="GET",route="/api/v1/chat-interfaces/{id}",status="404"}')).toBeGreaterThanOrEqual(1);
    expect(counts.get('{method="POST",route="/api/v1/chat-interfaces",status="201"}')).toBeGreaterThanOrEqual(1);
    expect(counts.get('{method="GET",route="/api (unmatched)",status="404"}')).toBeGreaterThanOrEqual(1);
    expect(byName.job_queue_depth!.metrics.map((m) => m.labels!.state).sort()).toEqual(['dead', 'queued', 'running']);
    expect(byName.webhook_delivery_attempts_total!.type).toBe('COUNTER');
    expect(byName.upstream_request_duration_seconds!.type).toBe('HISTOGRAM');
    // No label value is an id, a key or an address.
    const values = [...families.flatMap((f) => f.metrics.flatMap((m) => Object.values(m.labels ?? {}))), ...counts.keys()];
    for (const value of values) {
      expect(value).not.toMatch(/[0-9a-f]{8}-[0-9a-f]{4}-/);
      expect(value).not.toContain('127.0.0.1');
      expect(value).not.toContain(owner.token);
    }
  });

  it('does not exist without a configured token', async () => {
    const plain = await startTestApp();
    try {
      expect((await plain.request('GET', '/metrics')).status).toBe(404);
    } finally {
      await plain.stop();
    }
  });
});
