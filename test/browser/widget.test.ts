import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { createRequire } from 'node:module';
import type { Browser, BrowserContext, Frame, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/test-app.ts';
import { browserRunnable as runnable, launchChromium, OUTPUT } from '../helpers/browser.ts';

/**
 * The widget as a visitor meets it, in headless Chromium, truly cross-origin: a customer's site on
 * http://127.0.0.1:A embeds the loader from the service on https://localhost:B. The visitor opens the launcher,
 * asks the knowledge base, sees the answer stream in with its cited file, leaves contact details, reloads and
 * finds the conversation again; a hand-off asked for after the visitor token lapsed still brings the owner the
 * conversation; a site outside allowedOrigins cannot frame the chat; the chat works with the
 * keyboard alone and passes an axe-core audit; nothing is requested from any third host.
 */

const AXE_SOURCE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

let app: TestApp;
let browser: Browser;
let owner: { token: string; ownerId: string };
let other: { token: string; ownerId: string };
let serviceOrigin: string;
let slug: string;
let interfaceId: string;
let configId: string;
const sites: Server[] = [];
/** The origins a visit may reach: the service's instances and the customer sites; any other host is foreign. */
const known: string[] = [];
let allowedSite: string;
let foreignSite: string;

/** A customer's web page: any HTML plus our one script tag. */
async function startSite(html: () => string): Promise<string> {
  const server = createServer((req, res) => {
    if (req.url === '/favicon.ico') return void res.writeHead(404).end();
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(html());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  sites.push(server);
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  known.push(origin);
  return origin;
}

const hostPage = (extra = '', origin = serviceOrigin, chatSlug = slug) => `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Acme Outdoor</title></head>
<body><header><h1>Acme Outdoor</h1><a href="#products">Products</a></header>
<main><p>Tents, stoves and everything for a night outside.</p></main>
<script src="${origin}/widget.js" data-slug="${chatSlug}" ${extra} async></script>
</body></html>`;

interface Visit {
  context: BrowserContext;
  page: Page;
  /** Requests to hosts other than the site and the service (refused, not sent). */
  foreign: string[];
  errors: string[];
  cspMessages: string[];
}

async function visit(width = 1280, height = 900, context?: BrowserContext): Promise<Visit> {
  const ctx = context ?? (await browser.newContext({ ignoreHTTPSErrors: true, viewport: { width, height } }));
  const foreign: string[] = [];
  await ctx.route(
    (url) => !known.includes(url.origin) && url.protocol !== 'data:',
    (route) => {
      foreign.push(route.request().url());
      return route.abort();
    },
  );
  const page = await ctx.newPage();
  page.setDefaultTimeout(30_000);
  const errors: string[] = [];
  const cspMessages: string[] = [];
  page.on('pageerror', (error) => errors.push(error.message));
  page.on('console', (message) => {
    if (/Content Security Policy/i.test(message.text())) cspMessages.push(message.text());
  });
  return { context: ctx, page, foreign, errors, cspMessages };
}

/** The chat frame once the launcher has opened it and the app has rendered its input. */
async function openChat(page: Page): Promise<Frame> {
  await page.getByTestId('svc-chat-launcher').click();
  const handle = await page.getByTestId('svc-chat-frame').elementHandle();
  const frame = await handle!.contentFrame();
  await frame!.getByTestId('chat-input').waitFor({ state: 'visible' });
  return frame!;
}

async function send(frame: Frame, text: string) {
  const before = await frame.getByTestId('chat-message').count();
  await frame.getByTestId('chat-input').fill(text);
  await frame.getByTestId('chat-send').click();
  // The visitor's bubble, then the assistant's, which is complete when the send button is usable again.
  await expect.poll(() => frame.getByTestId('chat-message').count(), { timeout: 30_000 }).toBeGreaterThanOrEqual(before + 2);
  await expect.poll(() => frame.getByTestId('chat-send').isDisabled(), { timeout: 60_000 }).toBe(false);
}

/** "Talk to a person" filled in and sent; the ticket reference the visitor is shown. */
async function handOff(frame: Frame, request: { name: string; email: string; message: string }): Promise<string> {
  await frame.getByTestId('chat-handoff').click();
  const form = frame.getByTestId('handoff-form');
  await form.getByLabel(/name/i).fill(request.name);
  await form.getByLabel(/e-?mail/i).fill(request.email);
  await form.getByLabel(/help/i).fill(request.message);
  await form.locator('button[type="submit"]').click();
  const sent = frame.getByTestId('handoff-sent');
  await expect.poll(() => sent.textContent(), { timeout: 15_000 }).toMatch(/T-[0-9A-F]{10}/);
  return /T-[0-9A-F]{10}/.exec((await sent.textContent()) ?? '')![0];
}

async function axeAudit(frame: Frame | Page) {
  // Evaluated through the DevTools protocol, which the page's CSP does not govern (no inline script is added).
  await frame.evaluate(AXE_SOURCE);
  const result = await frame.evaluate(async () => {
    const axe = (
      window as unknown as {
        axe: { run(context: unknown, options: unknown): Promise<{ violations: Array<{ id: string; impact: string; nodes: unknown[] }> }> };
      }
    ).axe;
    const report = await axe.run(document, { resultTypes: ['violations'] });
    return report.violations.map((v) => ({ id: v.id, impact: v.impact, nodes: v.nodes.length }));
  });
  return result.filter((v) => v.impact === 'serious' || v.impact === 'critical');
}

beforeAll(async () => {
  if (!runnable) return;
  app = await startTestApp({ RATE_LIMIT_UPLOAD: '100' });
  serviceOrigin = `https://localhost:${new URL(app.url).port}`;
  known.push(serviceOrigin);
  owner = await app.signUp('widget-owner');
  other = await app.signUp('widget-other');
  const kb = await app.request('POST', '/api/v1/knowledge-base/configs', { token: owner.token, body: { name: 'Outdoor help' } });
  configId = kb.body.data.config.id;
  await app.request('PATCH', `/api/v1/knowledge-base/configs/${configId}/tools`, {
    token: owner.token,
    body: {
      tools: [
        { name: 'lead_capture', enabled: true },
        { name: 'book_slot', enabled: true, config: { slotsOffered: 3 } },
      ],
    },
  });
  const uploaded = await app.upload('/api/v1/knowledge-base/documents', {
    token: owner.token,
    fileName: 'tent-care.md',
    bytes: Buffer.from(
      '# Tent care\n\nDry your tent completely before storing it, otherwise mildew grows on the fabric.\n\n' +
        'Clean the **seams** with lukewarm water and a soft sponge; never put the tent in a washing machine.\n',
    ),
    fields: { configId },
  });
  expect(uploaded.status, uploaded.text).toBe(201);
  for (let i = 0; i < 300; i++) {
    const docs = await app.request('GET', `/api/v1/knowledge-base/documents?configId=${configId}`, { token: owner.token });
    if (docs.body.data.documents.every((d: { status: string }) => d.status === 'completed')) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  allowedSite = await startSite(() => hostPage());
  foreignSite = await startSite(() => hostPage());
  const created = await app.request('POST', '/api/v1/chat-interfaces', {
    token: owner.token,
    body: {
      name: 'Acme Outdoor help',
      configId,
      public: true,
      allowedOrigins: [allowedSite],
      welcomeMessage: 'Hello! Ask me anything about our tents.',
      placeholder: 'Ask about tents…',
      primaryColor: '#0b5394',
    },
  });
  expect(created.status, created.text).toBe(201);
  slug = created.body.data.chatInterface.slug;
  interfaceId = created.body.data.chatInterface.id;
  const allDay = [{ start: '00:00', end: '24:00' }];
  const hours = await app.request('PUT', `/api/v1/chat-interfaces/${interfaceId}/availability`, {
    token: owner.token,
    body: {
      timeZone: 'Europe/Berlin',
      weekly: { mon: allDay, tue: allDay, wed: allDay, thu: allDay, fri: allDay, sat: allDay, sun: allDay },
      minNoticeMinutes: 120,
    },
  });
  expect(hours.status, hours.text).toBe(200);
  browser = await launchChromium();
}, 120_000);

afterAll(async () => {
  await browser?.close();
  for (const site of sites) site.close();
  await app?.stop();
});

describe.runIf(runnable)('the widget on a customer site', () => {
  it('a visitor asks, sees the streamed answer with its source, leaves a lead, reloads and finds the conversation', async () => {
    const v = await visit();
    await v.page.goto(allowedSite);
    const launcher = v.page.getByTestId('svc-chat-launcher');
    await expect.poll(() => launcher.getAttribute('aria-expanded')).toBe('false');
    const frame = await openChat(v.page);
    await expect.poll(() => launcher.getAttribute('aria-expanded')).toBe('true');
    expect(await frame.locator('h1').textContent()).toContain('Acme Outdoor help');
    expect(await frame.getByTestId('chat-message').first().textContent()).toContain('Ask me anything about our tents');
    expect(await frame.getByTestId('chat-input').getAttribute('placeholder')).toBe('Ask about tents…');

    await send(frame, 'How should I store my tent?');
    const answer = frame.locator('[data-testid="chat-message"][data-role="assistant"]').last();
    expect(await answer.textContent()).toMatch(/dry|mildew/i);
    const sources = answer.getByTestId('chat-sources').or(frame.getByTestId('chat-sources').last());
    await sources.first().locator('summary').click();
    expect(await frame.getByTestId('chat-source').first().textContent()).toContain('tent-care.md');
    await v.page.screenshot({ path: join(OUTPUT, 'widget-answer-1280.png') });

    // Asking to be contacted brings the lead form; its submission is stored for the owner.
    await send(frame, 'Can someone from sales contact me, please?');
    const form = frame.getByTestId('lead-form');
    await form.waitFor({ state: 'visible' });
    await form.getByLabel(/name/i).first().fill('Ada Lovelace');
    await form.getByLabel(/e-?mail/i).fill('ada@example.com');
    await form.locator('button[type="submit"]').click();
    await form.waitFor({ state: 'detached' });
    await expect.poll(async () => (await app.request('GET', '/api/v1/leads', { token: owner.token })).body.data.leads.length).toBe(1);
    const leads = await app.request('GET', '/api/v1/leads', { token: owner.token });
    expect(leads.body.data.leads[0]).toMatchObject({ chatInterfaceId: interfaceId, fields: { name: 'Ada Lovelace', email: 'ada@example.com' } });
    expect(leads.body.data.leads[0].sessionId).toMatch(/^api_/);
    expect((await app.request('GET', '/api/v1/leads', { token: other.token })).body.data.leads).toEqual([]);

    // Back later: the same conversation, from the browser's own storage, through a new visitor token.
    await v.page.reload();
    const again = await openChat(v.page);
    await expect.poll(() => again.locator('[data-testid="chat-message"][data-role="user"]').count(), { timeout: 30_000 }).toBe(2);
    expect(await again.locator('[data-testid="chat-message"][data-role="user"]').first().textContent()).toContain('How should I store my tent?');

    // A new conversation starts empty but for the welcome.
    await again.getByTestId('chat-new').click();
    await expect.poll(() => again.locator('[data-testid="chat-message"][data-role="user"]').count()).toBe(0);

    expect(v.foreign).toEqual([]);
    expect(v.errors).toEqual([]);
    expect(v.cspMessages).toEqual([]);
    await v.context.close();
  }, 180_000);

  it('a visitor books an offered slot in the chat, sees it confirmed, and cancels it from the link’s page', async () => {
    const v = await visit();
    await v.page.goto(allowedSite);
    const frame = await openChat(v.page);
    await send(frame, 'I would like to book an appointment');
    const offer = frame.getByTestId('booking-slots').last();
    await offer.waitFor({ state: 'visible' });
    const slotButtons = offer.locator('button.slot');
    expect(await slotButtons.count()).toBe(3);
    await slotButtons.first().click();
    const form = frame.getByTestId('booking-form');
    await form.getByLabel(/name/i).fill('Grace Hopper');
    await form.getByLabel(/e-?mail/i).fill('grace@example.com');
    await form.locator('button[type="submit"]').click();
    const confirmation = frame.locator('[data-testid="chat-message"][data-role="assistant"]').last();
    await expect.poll(() => confirmation.textContent(), { timeout: 30_000 }).toMatch(/^(Assistant: )?Booked: /);
    const listed = await app.request('GET', `/api/v1/bookings?chatInterfaceId=${interfaceId}`, { token: owner.token });
    const booking = listed.body.data.bookings.find((b: { attendee: { email: string } }) => b.attendee.email === 'grace@example.com');
    expect(booking).toMatchObject({ status: 'confirmed', source: 'chat', attendee: { name: 'Grace Hopper' } });
    // The browser's own zone travels with the booking, for the attendee's mails.
    expect(booking.attendee.timeZone).toBe(await frame.evaluate(() => Intl.DateTimeFormat().resolvedOptions().timeZone));

    // The link from the confirmation mail: opening it changes nothing; the button cancels.
    const { cancelTokenOf } = await import('../../routers/bookings/booking-service.ts');
    const page = await v.context.newPage();
    const response = await page.goto(`${serviceOrigin}/bookings/cancel#${cancelTokenOf(app.deps, booking.id)}`);
    expect(response?.headers()['content-security-policy']).toContain("script-src 'self'");
    await page.getByTestId('cancel-form').waitFor({ state: 'visible' });
    const still = await app.request('GET', `/api/v1/bookings?chatInterfaceId=${interfaceId}&status=confirmed`, { token: owner.token });
    expect(still.body.data.bookings.map((b: { id: string }) => b.id)).toContain(booking.id);
    await page.getByLabel(/reason/i).fill('Plans changed');
    await page.getByRole('button', { name: /cancel the booking/i }).click();
    await expect.poll(() => page.getByTestId('cancel-status').textContent(), { timeout: 15_000 }).toMatch(/is cancelled/);
    const after = await app.request('GET', `/api/v1/bookings?chatInterfaceId=${interfaceId}&status=cancelled`, { token: owner.token });
    expect(after.body.data.bookings.find((b: { id: string }) => b.id === booking.id)).toMatchObject({ cancelledBy: 'attendee', cancelReason: 'Plans changed' });
    expect(await axeAudit(page)).toEqual([]);
    expect(v.foreign).toEqual([]);
    expect(v.errors).toEqual([]);
    expect(v.cspMessages).toEqual([]);
    await v.context.close();
  }, 120_000);

  it('“talk to a person” opens a hand-off ticket for the owner with the conversation', async () => {
    const v = await visit();
    await v.page.goto(allowedSite);
    const frame = await openChat(v.page);
    await send(frame, 'How should I store my tent?');
    const reference = await handOff(frame, { name: 'Alan Turing', email: 'alan@example.com', message: 'I would like to speak to someone about a return.' });
    const tickets = await app.request('GET', '/api/v1/support/tickets', { token: owner.token });
    const ticket = tickets.body.data.tickets.find((t: { reference: string }) => t.reference === reference);
    expect(ticket).toMatchObject({ chatInterfaceId: interfaceId, addressedTo: 'owner', requester: { name: 'Alan Turing', email: 'alan@example.com' } });
    const detail = await app.request('GET', `/api/v1/support/tickets/${ticket.id}`, { token: owner.token });
    expect(detail.body.data.transcript[0].content).toBe('How should I store my tent?');
    expect(await axeAudit(frame)).toEqual([]);

    // The link from the requester's confirmation mail: opening it confirms nothing; the button does.
    expect(ticket.requester.confirmed).toBe(false);
    const { confirmTokenOf } = await import('../../routers/support/confirmation.ts');
    const page = await v.context.newPage();
    const response = await page.goto(`${serviceOrigin}/support/confirm#${confirmTokenOf(app.deps, ticket.id)}`);
    expect(response?.headers()['content-security-policy']).toContain("script-src 'self'");
    await page.getByTestId('confirm-form').waitFor({ state: 'visible' });
    const unopened = await app.request('GET', `/api/v1/support/tickets/${ticket.id}`, { token: owner.token });
    expect(unopened.body.data.ticket.requester.confirmed).toBe(false);
    await page.getByRole('button', { name: /confirm my address/i }).click();
    await expect.poll(() => page.getByTestId('confirm-status').textContent(), { timeout: 15_000 }).toContain(reference);
    const confirmed = await app.request('GET', `/api/v1/support/tickets/${ticket.id}`, { token: owner.token });
    expect(confirmed.body.data.ticket.requester.confirmed).toBe(true);
    expect(await axeAudit(page)).toEqual([]);
    expect(v.errors).toEqual([]);
    expect(v.cspMessages).toEqual([]);
    await v.context.close();
  }, 120_000);

  it('a hand-off after the visitor token has lapsed renews it first, so the owner’s ticket still has the conversation', async () => {
    // Another instance of the service on this database whose visitor tokens last 3 s instead of an hour: the token
    // the widget holds runs out while the page stays open, as an hour-long one does on a page left open.
    const peer = await app.startPeer({ VISITOR_TOKEN_TTL_SECONDS: '3' });
    const v = await visit();
    try {
      const peerOrigin = `https://localhost:${new URL(peer.url).port}`;
      known.push(peerOrigin);
      let shortSlug = '';
      const site = await startSite(() => hostPage('', peerOrigin, shortSlug));
      const created = await app.request('POST', '/api/v1/chat-interfaces', {
        token: owner.token,
        body: { name: 'Acme short tokens', configId, public: true, allowedOrigins: [site] },
      });
      expect(created.status, created.text).toBe(201);
      shortSlug = created.body.data.chatInterface.slug;

      // The widget's calls to the service, in the order the browser sends them.
      const calls: Array<{ method: string; path: string; authorization: string | undefined; body: string | null }> = [];
      v.page.on('request', (request) => {
        const url = new URL(request.url());
        if (url.origin === peerOrigin && url.pathname.startsWith('/api/')) {
          calls.push({ method: request.method(), path: url.pathname, authorization: request.headers().authorization, body: request.postData() });
        }
      });
      await v.page.goto(site);
      const frame = await openChat(v.page);
      await send(frame, 'How should I store my tent?');
      const held = calls
        .filter((c) => c.path.endsWith('/visitor-messages'))
        .at(-1)!
        .authorization!.replace(/^Bearer /, '');
      expect(held).toMatch(/^vis_/);
      // The token the widget holds is refused by now: a hand-off carrying it would come without the conversation.
      await expect
        .poll(async () => (await app.request('GET', `/api/v1/chat/${shortSlug}/visitor-conversations`, { token: held })).status, {
          timeout: 15_000,
          interval: 250,
        })
        .toBe(401);

      const before = calls.length;
      const reference = await handOff(frame, { name: 'Joan Clarke', email: 'joan@example.com', message: 'My tent smells of mildew; can someone call me?' });

      // The owner's ticket has the conversation.
      const tickets = await app.request('GET', '/api/v1/support/tickets', { token: owner.token });
      const ticket = tickets.body.data.tickets.find((t: { reference: string }) => t.reference === reference);
      expect(ticket).toMatchObject({ addressedTo: 'owner', requester: { email: 'joan@example.com' } });
      const detail = await app.request('GET', `/api/v1/support/tickets/${ticket.id}`, { token: owner.token });
      expect(detail.status, detail.text).toBe(200);
      expect(detail.body.data.transcript?.[0]).toMatchObject({ role: 'user', content: 'How should I store my tent?' });

      // Because the hand-off asked for a fresh token (with the resume token) first and sent the ticket with it.
      const handOffCalls = calls.slice(before);
      expect(handOffCalls.map((c) => `${c.method} ${c.path}`)).toEqual([`POST /api/v1/chat/${shortSlug}/visitor-sessions`, 'POST /api/v1/support/contact']);
      expect(JSON.parse(handOffCalls[0]!.body!)).toHaveProperty('resumeToken');
      const contact = handOffCalls[1]!;
      expect(contact.authorization).toMatch(/^Bearer vis_/);
      expect(contact.authorization).not.toBe(`Bearer ${held}`);
      const sessionId = JSON.parse(contact.body!).sessionId as string;
      expect(sessionId).toMatch(/^api_/);
      expect(ticket.sessionId).toBe(sessionId);

      // Without the renewal: the same hand-off with the token the widget held is answered alike, without the conversation.
      const stale = await app.request('POST', '/api/v1/support/contact', {
        token: held,
        body: {
          slug: shortSlug,
          subject: 'Talk to a person',
          category: 'general',
          name: 'Joan Clarke',
          email: 'joan@example.com',
          message: 'Again',
          sessionId,
        },
      });
      expect(stale.status, stale.text).toBe(202);
      const again = await app.request('GET', '/api/v1/support/tickets', { token: owner.token });
      const staleTicket = again.body.data.tickets.find((t: { reference: string }) => t.reference === stale.body.data.ticket.reference);
      expect(staleTicket.sessionId).toBeNull();
      expect((await app.request('GET', `/api/v1/support/tickets/${staleTicket.id}`, { token: owner.token })).body.data.transcript).toBeNull();
      expect(v.foreign).toEqual([]);
      expect(v.errors).toEqual([]);
      expect(v.cspMessages).toEqual([]);
    } finally {
      await v.context.close();
      await peer.stop();
    }
  }, 120_000);

  it('a site outside allowedOrigins cannot frame the chat', async () => {
    const v = await visit();
    await v.page.goto(foreignSite);
    await v.page.getByTestId('svc-chat-launcher').click();
    const frameElement = v.page.getByTestId('svc-chat-frame');
    await frameElement.waitFor({ state: 'attached' });
    // The browser refuses the page (CSP frame-ancestors) and reports it; the chat never renders there.
    await expect.poll(() => v.cspMessages.some((m) => /frame-ancestors/.test(m)), { timeout: 15_000 }).toBe(true);
    const frame = await (await frameElement.elementHandle())!.contentFrame();
    expect(await frame?.locator('#chat-root').count()).toBe(0);

    const page = await app.request('GET', `/c/${slug}?embed=1`);
    expect(page.headers['content-security-policy']).toContain(`frame-ancestors ${allowedSite}`);
    // The API refuses to mint visitor tokens for scripts on that site, too.
    const minted = await app.request('POST', `/api/v1/chat/${slug}/visitor-sessions`, { body: {}, headers: { origin: foreignSite } });
    expect(minted.status).toBe(403);
    await v.context.close();
  }, 60_000);

  it('works with the keyboard alone and has no serious accessibility violations; screenshots at 1280 and 360 px', async () => {
    for (const width of [1280, 360]) {
      const v = await visit(width, width === 360 ? 740 : 900);
      await v.page.goto(allowedSite);
      // Tab from the top of the host page to the launcher, open it with Enter.
      let focused = '';
      for (let i = 0; i < 10 && focused !== 'svc-chat-launcher'; i++) {
        await v.page.keyboard.press('Tab');
        focused = await v.page.evaluate(() => document.activeElement?.getAttribute('data-testid') ?? '');
      }
      expect(focused).toBe('svc-chat-launcher');
      await v.page.keyboard.press('Enter');
      const handle = await v.page.getByTestId('svc-chat-frame').elementHandle();
      const frame = (await handle!.contentFrame())!;
      await frame.getByTestId('chat-input').waitFor({ state: 'visible' });
      // Opening moves focus into the chat's input; Enter sends.
      await expect.poll(() => frame.evaluate(() => document.activeElement?.getAttribute('data-testid'))).toBe('chat-input');
      await v.page.keyboard.type('Can I wash the tent in a machine?');
      await v.page.keyboard.press('Enter');
      await expect.poll(() => frame.locator('[data-testid="chat-message"][data-role="assistant"]').count(), { timeout: 60_000 }).toBeGreaterThanOrEqual(2);
      await expect.poll(() => frame.getByTestId('chat-send').isDisabled(), { timeout: 60_000 }).toBe(false);
      // New messages are announced: the log is a live region.
      expect(await frame.locator('[role="log"][aria-live="polite"]').count()).toBe(1);
      const box = await handle!.boundingBox();
      if (width === 360) expect(box!.width).toBeGreaterThanOrEqual(340);
      else expect(box!.width).toBeLessThanOrEqual(420);
      await v.page.screenshot({ path: join(OUTPUT, `widget-${width}.png`) });
      expect(await axeAudit(frame)).toEqual([]);
      expect(v.foreign).toEqual([]);
      expect(v.errors).toEqual([]);
      await v.context.close();
    }
  }, 180_000);

  it('the hosted page on its own: full-page chat, strict policy, audited, at 1280 and 360 px', async () => {
    for (const width of [1280, 360]) {
      const v = await visit(width, 800);
      const response = await v.page.goto(`${serviceOrigin}/c/${slug}`);
      expect(response?.status()).toBe(200);
      const csp = response?.headers()['content-security-policy'] ?? '';
      expect(csp).toContain("script-src 'self'");
      expect(csp).not.toContain('unsafe');
      await v.page.getByTestId('chat-input').waitFor({ state: 'visible' });
      const scrollWidth = await v.page.evaluate(() => document.documentElement.scrollWidth);
      expect(scrollWidth).toBeLessThanOrEqual(width);
      await v.page.screenshot({ path: join(OUTPUT, `hosted-page-${width}.png`) });
      expect(await axeAudit(v.page)).toEqual([]);
      expect(v.foreign).toEqual([]);
      expect(v.errors).toEqual([]);
      expect(v.cspMessages).toEqual([]);
      await v.context.close();
    }
    const missing = await app.request('GET', '/c/no-such-chat');
    expect(missing.status).toBe(404);
    expect(missing.headers['content-type']).toContain('text/html');
  }, 120_000);
});
