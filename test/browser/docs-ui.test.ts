import { join } from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/test-app.ts';
import { browserRunnable as runnable, launchChromium, OUTPUT } from '../helpers/browser.ts';

/**
 * The API reference and GraphiQL in a real browser (Debian's chromium; CI installs it): each page renders
 * under its own Content-Security-Policy with no violation, reaches no host but ours, and does its one job
 * (try-it, a query). Screenshots go to test-output/ for a person to look at.
 */

let app: TestApp;
let browser: Browser;

beforeAll(async () => {
  if (!runnable) return;
  app = await startTestApp();
  browser = await launchChromium();
});

afterAll(async () => {
  await browser?.close();
  await app?.stop();
});

interface Watched {
  context: BrowserContext;
  page: Page;
  /** CSP violations, from the page's securitypolicyviolation events and from the console. */
  violations(): Promise<string[]>;
  /** Requests to any origin other than the app's (they are refused, not sent). */
  foreign: string[];
  errors: string[];
}

async function watchedPage(): Promise<Watched> {
  const origin = new URL(app.url).origin;
  const context = await browser.newContext({ ignoreHTTPSErrors: true, viewport: { width: 1280, height: 900 } });
  const foreign: string[] = [];
  const consoleViolations: string[] = [];
  const errors: string[] = [];
  await context.route(
    (url) => url.origin !== origin && url.protocol !== 'data:',
    (route) => {
      foreign.push(route.request().url());
      return route.abort();
    },
  );
  // Init scripts are injected by the browser itself, outside the page's policy.
  await context.addInitScript(() => {
    const seen: string[] = [];
    (window as unknown as { cspViolations: string[] }).cspViolations = seen;
    document.addEventListener('securitypolicyviolation', (event) => seen.push(`${event.effectiveDirective} ${event.blockedURI}`));
  });
  const page = await context.newPage();
  // The whole suite runs beside this file on two cores: rendering the reference can take several seconds.
  page.setDefaultTimeout(60_000);
  page.on('console', (message) => {
    if (/Content Security Policy/i.test(message.text())) consoleViolations.push(message.text());
  });
  page.on('pageerror', (error) => errors.push(error.message));
  return {
    context,
    page,
    foreign,
    errors,
    violations: async () => [...consoleViolations, ...(await page.evaluate(() => (window as unknown as { cspViolations: string[] }).cspViolations))],
  };
}

describe.runIf(runnable)('browser pages', () => {
  it('the API reference renders under its policy and "try it" calls the API', async () => {
    const w = await watchedPage();
    // A deep link (tag/operationId): past 100 operations Swagger UI renders only the rows in view, and the link
    // scrolls the list to the operation and opens it.
    const response = await w.page.goto(`${app.url}/api/v1/docs#/Health/health-hosting`);
    expect(response?.status()).toBe(200);
    const csp = response?.headers()['content-security-policy'] ?? '';
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("frame-ancestors 'none'");
    expect(csp).not.toContain('unsafe');
    expect(response?.headers()['x-frame-options']).toBe('DENY');

    const operation = w.page.locator('.opblock-get').filter({ has: w.page.locator('.opblock-summary-path[data-path="/api/v1/health/hosting"]') });
    await operation.locator('button.try-out__btn').waitFor({ state: 'visible' });
    await w.page.screenshot({ path: join(OUTPUT, 'api-reference.png') });
    await operation.locator('button.try-out__btn').click();
    await operation.locator('button.execute').click();
    const result = operation.locator('.live-responses-table tbody .response-col_status');
    await expect.poll(() => result.textContent(), { timeout: 15_000 }).toBe('200');
    await operation.locator('.live-responses-table').scrollIntoViewIfNeeded();
    await w.page.screenshot({ path: join(OUTPUT, 'api-reference-try-it.png') });

    expect(await w.violations()).toEqual([]);
    expect(w.foreign).toEqual([]);
    expect(w.errors).toEqual([]);
    await w.context.close();
  }, 90_000);

  it('GraphiQL renders for browsers under its policy and runs a query', async () => {
    const w = await watchedPage();
    const response = await w.page.goto(`${app.url}/graphql`);
    expect(response?.status()).toBe(200);
    expect(response?.headers()['content-type']).toContain('text/html');
    const csp = response?.headers()['content-security-policy'] ?? '';
    expect(csp).toContain("default-src 'none'");
    expect(csp).not.toContain('unsafe');
    expect(response?.headers()['x-frame-options']).toBe('DENY');

    const editor = w.page.locator('.graphiql-query-editor .CodeMirror');
    await editor.waitFor({ state: 'visible' });
    // Typed through CodeMirror's own API: key-by-key typing would race its bracket auto-closing.
    await editor.evaluate((element) => (element as unknown as { CodeMirror: { setValue(text: string): void } }).CodeMirror.setValue('{ __typename }'));
    await w.page.locator('.graphiql-execute-button').click();
    await expect.poll(() => w.page.locator('.graphiql-response').textContent(), { timeout: 15_000 }).toContain('"__typename": "Query"');
    await w.page.screenshot({ path: join(OUTPUT, 'graphiql.png') });

    expect(await w.violations()).toEqual([]);
    expect(w.foreign).toEqual([]);
    expect(w.errors).toEqual([]);
    await w.context.close();
  }, 90_000);

  it("API clients still get JSON from GET /graphql, and the pages' files are cached for good", async () => {
    const json = await app.request('GET', `/graphql?query=${encodeURIComponent('{ __typename }')}`, { headers: { accept: 'application/json' } });
    expect(json.body).toEqual({ data: { __typename: 'Query' } });

    const page = await app.request('GET', '/graphql', { headers: { accept: 'text/html' } });
    const [, asset] = /src="(\/api\/v1\/docs\/assets\/graphiql\.[0-9a-f]+\.js)"/.exec(page.text) ?? [];
    expect(asset).toBeDefined();
    const first = await app.request('GET', asset!, { headers: { 'accept-encoding': 'gzip' } });
    expect(first.status).toBe(200);
    expect(first.headers['cache-control']).toBe('public, max-age=31536000, immutable');
    expect(first.headers['content-encoding']).toBe('gzip');
    const again = await app.request('GET', asset!, { headers: { 'if-none-match': String(first.headers.etag) } });
    expect(again.status).toBe(304);
    expect((await app.request('GET', '/api/v1/docs/assets/graphiql.0000000000000000.js')).status).toBe(404);
    expect((await app.request('GET', '/api/v1/docs', { headers: { 'accept-encoding': 'gzip' } })).headers['content-encoding']).toBe('gzip');
  });
});
