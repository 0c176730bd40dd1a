/**
 * Widget benchmark: `npm run bench:widget`.
 *
 * What a visitor waits for, measured in headless Chromium (Debian's chromium) against the service started
 * in-process (bench-kit's startBenchService, embedded PGlite unless DATABASE_URL is set), with a customer's page
 * on http://127.0.0.1:<port> embedding the loader from https://localhost:<port>:
 *   1. loader size: /widget.js gzipped, as served (Content-Encoding: gzip), against its uncompressed size and
 *      the 15 KB target;
 *   2. loader to launcher: from the moment the browser starts requesting /widget.js to the moment the launcher
 *      button is in the page and enabled, against the network time of /widget.js itself (same page load, from
 *      the Resource Timing entry); BENCH_LOADS page loads, p50;
 *   3. first character: from the visitor's click on Send to the first streamed character in the chat's log,
 *      against the same request made with fetch() from the chat's own page (same token, same question, reading
 *      the SSE stream to its first delta); BENCH_MESSAGES of each, alternating, p50.
 *
 * stdout: one JSON line per figure, nothing else (progress on stderr):
 *   {"bench":"widget","metric":...,"value":...,"baseline":...,"baseline_value":...,"ratio":...,"ratio_definition":...}
 *
 * Knobs (environment):
 *   BENCH_LOADS      page loads for figure 2, default 10 (3..100)
 *   BENCH_MESSAGES   messages per variant for figure 3, default 10 (3..100)
 *   BENCH_TIMEOUT_S  hard bound on the whole run, default 300 (60..3600)
 *   DATABASE_URL     optional postgres:// URL of a server on which a scratch database is created and dropped
 */
import { createServer } from 'node:http';
import { get as httpsGet } from 'node:https';
import type { AddressInfo } from 'node:net';
import { gunzipSync } from 'node:zlib';
import type { Frame, Page } from 'playwright-core';
import { launchChromium } from '../helpers/browser.ts';
import {
  call,
  createKnowledgeBase,
  createLog,
  emit,
  expectStatus,
  intEnv,
  percentile,
  round,
  signUp,
  startBenchService,
  startWatchdog,
  uploadDocument,
} from './bench-kit.ts';

const LOADS = intEnv('BENCH_LOADS', 10, 3, 100);
const MESSAGES = intEnv('BENCH_MESSAGES', 10, 3, 100);
const TIMEOUT_S = intEnv('BENCH_TIMEOUT_S', 300, 60, 3600);
const LOADER_TARGET_BYTES = 15 * 1024;

const log = createLog('widget');
const p50 = (values: number[]) =>
  percentile(
    [...values].sort((x, y) => x - y),
    50,
  );

async function launcherReady(page: Page, site: string, serviceOrigin: string) {
  // Written before any page script runs: the instant the launcher appears enabled, on the page's own clock.
  await page.addInitScript(() => {
    new MutationObserver((_, observer) => {
      const button = document.querySelector('[data-testid="svc-chat-launcher"]') as HTMLButtonElement | null;
      if (button && !button.disabled) {
        (window as unknown as { launcherAt: number }).launcherAt = performance.now();
        observer.disconnect();
      }
    }).observe(document, { childList: true, subtree: true });
  });
  await page.goto(site);
  await page.getByTestId('svc-chat-launcher').waitFor({ state: 'visible' });
  return page.evaluate((loader) => {
    const entry = performance.getEntriesByName(loader)[0] as PerformanceResourceTiming;
    const at = (window as unknown as { launcherAt: number }).launcherAt;
    return { launcher: at - entry.startTime, network: entry.responseEnd - entry.startTime };
  }, `${serviceOrigin}/widget.js`);
}

/**
 * Browser-side probes are strings: tsx compiles this file with helpers (`__name`) that do not exist in the page.
 * The click time and the first character's time are both taken on the page's clock, by listeners installed
 * before the click.
 */
const PROBE = `(() => {
  const count = document.querySelectorAll('[data-testid="chat-message"][data-role="assistant"]').length;
  window.benchSentAt = undefined;
  window.benchFirstAt = undefined;
  document.querySelector('[data-testid="chat-send"]').addEventListener('click', () => { window.benchSentAt = performance.now(); }, { once: true, capture: true });
  const observer = new MutationObserver(() => {
    const bubbles = document.querySelectorAll('[data-testid="chat-message"][data-role="assistant"]');
    const last = bubbles[bubbles.length - 1];
    const text = last && last.querySelector('.text');
    if (bubbles.length > count && text && text.textContent.trim().length > 0) {
      window.benchFirstAt = performance.now();
      observer.disconnect();
    }
  });
  observer.observe(document.body, { childList: true, subtree: true, characterData: true });
})()`;

async function until(frame: Frame, condition: string, timeoutMs = 60_000) {
  const deadline = Date.now() + timeoutMs;
  while (!(await frame.evaluate(condition))) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${condition}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

async function firstCharacterInWidget(frame: Frame, question: string) {
  await frame.getByTestId('chat-input').fill(question);
  await frame.evaluate(PROBE);
  await frame.getByTestId('chat-send').click();
  // Polled with evaluate (the DevTools protocol): waitForFunction would eval in the page, which its CSP forbids.
  await until(frame, 'window.benchFirstAt !== undefined');
  const elapsed = (await frame.evaluate('window.benchFirstAt - window.benchSentAt')) as number;
  // Let the reply finish before the next message.
  await until(frame, '!document.querySelector(\'[data-testid="chat-send"]\').disabled');
  return elapsed;
}

async function firstCharacterWithFetch(frame: Frame, slug: string, token: string, question: string) {
  return frame.evaluate(
    async ([s, t, q]) => {
      const started = performance.now();
      const response = await fetch(`/api/v1/chat/${s}/visitor-messages`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'text/event-stream', authorization: `Bearer ${t}` },
        body: JSON.stringify({ message: q }),
      });
      const reader = (response.body as ReadableStream<Uint8Array>).getReader();
      const decoder = new TextDecoder();
      let buffered = '';
      let first = Number.NaN;
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        buffered += decoder.decode(value, { stream: true });
        if (Number.isNaN(first) && /"type":"delta","text":"[^"]/.test(buffered)) first = performance.now();
      }
      return first - started;
    },
    [slug, token, question],
  );
}

async function main() {
  const service = await startBenchService(log);
  const watchdog = startWatchdog(TIMEOUT_S, log, () => service.cleanup());
  try {
    const origin = service.app.url;
    const serviceOrigin = `https://localhost:${service.app.port}`;
    const token = await signUp(origin);
    const configId = await createKnowledgeBase(origin, token, { name: 'Widget bench' });
    const doc = await uploadDocument(
      origin,
      token,
      configId,
      'tents.md',
      'text/markdown',
      Buffer.from('# Tents\n\nDry your tent before storing it. Clean the seams with lukewarm water and a soft sponge.\n'),
    );
    for (let i = 0; i < 600; i++) {
      const docs = await call(origin, 'GET', `/api/v1/knowledge-base/documents?configId=${configId}`, { token });
      if (docs.json.data.documents.some((d: { id: string; status: string }) => d.id === doc.documentId && d.status === 'completed')) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    const site = createServer((_req, res) =>
      res.writeHead(200, { 'content-type': 'text/html' }).end(`<!DOCTYPE html><html lang="en"><head><title>Shop</title></head><body><p>Shop</p>
<script src="${serviceOrigin}/widget.js" data-slug="widget-bench" async></script></body></html>`),
    );
    await new Promise<void>((resolve) => site.listen(0, '127.0.0.1', resolve));
    service.onCleanup('close the customer site', () => void site.close());
    const siteOrigin = `http://127.0.0.1:${(site.address() as AddressInfo).port}`;
    await expectStatus(
      call(origin, 'POST', '/api/v1/chat-interfaces', {
        token,
        body: { name: 'Widget bench', slug: 'widget-bench', configId, public: true, allowedOrigins: [siteOrigin] },
      }),
      201,
      'create the interface',
    );

    // 1. Size, as served.
    const gzipped = await servedLoader(origin);
    const raw = gunzipSync(gzipped).length;
    emit({
      bench: 'widget',
      metric: 'loader_gzip_bytes',
      value: gzipped.length,
      baseline: 'uncompressed',
      baseline_value: raw,
      ratio: round(gzipped.length / raw, 3),
      ratio_definition: 'gzipped / uncompressed',
      target_bytes: LOADER_TARGET_BYTES,
      meets_target: gzipped.length <= LOADER_TARGET_BYTES,
    });

    const browser = await launchChromium();
    service.onCleanup('close the browser', () => browser.close());

    // 2. Loader to launcher.
    const launcher: number[] = [];
    const network: number[] = [];
    for (let i = 0; i < LOADS; i++) {
      const context = await browser.newContext({ ignoreHTTPSErrors: true });
      const page = await context.newPage();
      const timing = await launcherReady(page, siteOrigin, serviceOrigin);
      launcher.push(timing.launcher);
      network.push(timing.network);
      await context.close();
    }
    emit({
      bench: 'widget',
      metric: 'loader_to_launcher_p50_ms',
      value: round(p50(launcher), 1),
      baseline: 'widget.js network time',
      baseline_value: round(p50(network), 1),
      ratio: round(p50(launcher) / p50(network), 2),
      ratio_definition: 'launcher interactive / loader network time (1 = no time spent after the bytes arrived)',
      samples: LOADS,
    });

    // 3. First streamed character: the widget against fetch() from the chat's own page.
    const context = await browser.newContext({ ignoreHTTPSErrors: true });
    const page = await context.newPage();
    page.setDefaultTimeout(60_000);
    await page.goto(siteOrigin);
    await page.getByTestId('svc-chat-launcher').click();
    const frame = (await (await page.getByTestId('svc-chat-frame').elementHandle())!.contentFrame())!;
    await frame.getByTestId('chat-input').waitFor({ state: 'visible' });
    const visitorToken = await frame.evaluate(async () => {
      const r = await fetch('/api/v1/chat/widget-bench/visitor-sessions', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
      return (await r.json()).data.token as string;
    });
    const inWidget: number[] = [];
    const withFetch: number[] = [];
    for (let i = 0; i < MESSAGES; i++) {
      const question = `How do I clean the seams of my tent? (${i})`;
      inWidget.push(await firstCharacterInWidget(frame, question));
      withFetch.push(await firstCharacterWithFetch(frame, 'widget-bench', visitorToken, question));
    }
    await context.close();
    emit({
      bench: 'widget',
      metric: 'send_to_first_character_p50_ms',
      value: round(p50(inWidget), 1),
      baseline: 'fetch() from the chat page',
      baseline_value: round(p50(withFetch), 1),
      difference_ms: round(p50(inWidget) - p50(withFetch), 1),
      ratio: round(p50(inWidget) / p50(withFetch), 2),
      ratio_definition: 'widget / fetch (1 = the widget adds nothing)',
      samples: MESSAGES,
    });
  } finally {
    clearTimeout(watchdog);
    await service.cleanup();
  }
}

/** The loader's bytes exactly as a browser receives them (gzip asked for; the service's certificate is its own). */
function servedLoader(origin: string): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const req = httpsGet(`${origin}/widget.js`, { headers: { 'accept-encoding': 'gzip' }, rejectUnauthorized: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () =>
        res.headers['content-encoding'] === 'gzip' ? resolve(Buffer.concat(chunks)) : reject(new Error('/widget.js was not served gzip-compressed')),
      );
      res.on('error', reject);
    });
    req.on('error', reject);
  });
}

main().catch((error: unknown) => {
  log(`failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
  process.exit(1);
});
