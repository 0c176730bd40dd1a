import type { IncomingMessage, ServerResponse } from 'node:http';
import { AppError } from '../../../schema/errors.ts';
import type { AppDeps, Context } from '../../../routers/context.ts';
import { hostedPageOf } from '../../../routers/visitors/access.ts';
import { CONFIRM_PAGE_PATH } from '../../../routers/support/confirmation.ts';

import { normalizeHostname } from '../../../routers/domains/hostname.ts';
import { browserAsset, IMMUTABLE_CACHE_CONTROL, type BrowserAsset } from '../browser-assets.ts';
import { sendError } from '../envelope.ts';
import { ifNoneMatchIncludes } from '../conditional-request.ts';
import { HTTP_STATUS } from '../http-status.ts';

/** The bundles the hosted page and the loader are made of (built in memory by build.ts). */
export interface WebBundles {
  chatJs: Buffer;
  chatCss: Buffer;
  loaderJs: Buffer;
  /** The attendee's booking-cancellation page. */
  cancelJs: Buffer;
  /** The support requester's address-confirmation page. */
  confirmJs: Buffer;
}

export const WEB_ASSETS_PATH = '/widget/assets/';
const SLUG = /^[a-z0-9](?:[a-z0-9-]{1,62}[a-z0-9])$/;
/** The loader's URL never changes (owners paste it once), so browsers revalidate it every few minutes. */
const LOADER_CACHE_CONTROL = 'public, max-age=300';

interface WebAssets {
  chatJs: BrowserAsset;
  chatCss: BrowserAsset;
  loaderJs: BrowserAsset;
  cancelJs: BrowserAsset;
  confirmJs: BrowserAsset;
  byName: ReadonlyMap<string, BrowserAsset>;
}

const escapeHtml = (text: string) => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

/**
 * The page's policy: its own scripts and styles only (no inline code), requests only to this origin, and
 * framing only by the sites the owner listed, which is the one check that works inside an iframe: the
 * browser refuses to render the page in any other parent.
 */
export function hostedPageHeaders(allowedOrigins: readonly string[]): Record<string, string> {
  const ancestors = allowedOrigins.length > 0 ? allowedOrigins.join(' ') : "'none'";
  return {
    'Content-Security-Policy':
      "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; font-src 'self'; connect-src 'self'; " +
      `base-uri 'none'; form-action 'none'; frame-ancestors ${ancestors}`,
    'Referrer-Policy': 'no-referrer',
    'Cross-Origin-Opener-Policy': 'same-origin',
  };
}

function pageHtml(assets: WebAssets, page: { slug: string; name: string; allowedOrigins: readonly string[] } | undefined, embed: boolean) {
  const root = page
    ? `<div id="chat-root" data-slug="${escapeHtml(page.slug)}" data-embed="${embed ? '1' : '0'}" data-parent-origins="${escapeHtml(JSON.stringify(page.allowedOrigins))}"></div>`
    : '<main><h1>This chat is not available</h1><p>The address may be wrong, or the chat is no longer public.</p></main>';
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex">
<title>${escapeHtml(page?.name ?? 'Chat not available')}</title>
<link rel="stylesheet" href="${WEB_ASSETS_PATH}${assets.chatCss.name}">
</head>
<body${embed ? ' class="embed"' : ''}>
${root}
${page ? `<script src="${WEB_ASSETS_PATH}${assets.chatJs.name}"></script>` : ''}
</body>
</html>
`;
}

/** Where the attendee's cancellation link points (the token follows in the fragment). */
const CANCEL_PAGE_PATH = '/bookings/cancel';

/**
 * A page that acts on the token in its link (web/shared/token-form.ts): a heading, a form whose button posts the
 * token, and a status line. `name` prefixes the ids the script looks for; `fields` is fixed markup.
 */
function tokenPageHtml(assets: WebAssets, page: { name: 'cancel' | 'confirm'; title: string; fields: string; button: string; script: BrowserAsset }) {
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex">
<title>${page.title}</title>
<link rel="stylesheet" href="${WEB_ASSETS_PATH}${assets.chatCss.name}">
</head>
<body>
<main id="${page.name}-root" class="cancel-page">
<h1>${page.title}</h1>
<form id="${page.name}-form" class="lead-form" data-testid="${page.name}-form">
${page.fields}
<button type="submit" class="send">${page.button}</button>
</form>
<p id="${page.name}-status" role="status" data-testid="${page.name}-status"></p>
</main>
<script src="${WEB_ASSETS_PATH}${page.script.name}"></script>
</body>
</html>
`;
}

const cancelPageHtml = (assets: WebAssets) =>
  tokenPageHtml(assets, {
    name: 'cancel',
    title: 'Cancel your booking',
    fields:
      '<div class="field"><label for="cancel-reason">Reason (optional)</label><textarea id="cancel-reason" name="reason" rows="3" maxlength="500"></textarea></div>',
    button: 'Cancel the booking',
    script: assets.cancelJs,
  });

const confirmPageHtml = (assets: WebAssets) =>
  tokenPageHtml(assets, {
    name: 'confirm',
    title: 'Confirm your address',
    fields: '<p>Confirm that this e-mail address is yours, to receive the answers to your message by e-mail.</p>',
    button: 'Confirm my address',
    script: assets.confirmJs,
  });

function send(req: IncomingMessage, res: ServerResponse, status: number, headers: Record<string, string>, body: Buffer | string, gzip?: () => Buffer) {
  let payload = typeof body === 'string' ? Buffer.from(body) : body;
  const out: Record<string, string> = { ...headers };
  if (gzip) {
    out.Vary = 'Accept-Encoding';
    if (/\bgzip\b/i.test(String(req.headers['accept-encoding'] ?? ''))) {
      payload = gzip();
      out['Content-Encoding'] = 'gzip';
    }
  }
  res.writeHead(status, { ...out, 'Content-Length': String(payload.length) });
  res.end(req.method === 'HEAD' ? undefined : payload);
}

function sendAsset(req: IncomingMessage, res: ServerResponse, asset: BrowserAsset, cacheControl: string) {
  const headers = { 'Content-Type': asset.contentType, 'Cache-Control': cacheControl, ETag: asset.etag };
  if (ifNoneMatchIncludes(req, asset.etag)) {
    res.writeHead(304, headers);
    res.end();
    return;
  }
  send(req, res, 200, headers, asset.body, asset.gzip);
}

/**
 * Visitors' side of the listener: the hosted chat page `/c/{slug}` (`?embed=1` inside the widget's iframe), the
 * loader `/widget.js` that owners paste into their sites, and the page's bundles under content-hashed names.
 * The page never depends on its own URL (assets and API calls are root-relative), so a custom domain can
 * serve it at `/`.
 */
export function createWebHandler(deps: Pick<AppDeps, 'database' | 'logger' | 'config' | 'domainRoutes'>, bundles: () => Promise<WebBundles>) {
  const serviceHosts = new Set(deps.config.PUBLIC_ORIGINS.map((o) => new URL(o).hostname));
  let assets: Promise<WebAssets> | undefined;
  const loadAssets = () =>
    (assets ??= bundles().then(
      (built) => {
        const chatJs = browserAsset('chat', 'js', 'text/javascript; charset=utf-8', built.chatJs);
        const chatCss = browserAsset('chat', 'css', 'text/css; charset=utf-8', built.chatCss);
        const loaderJs = browserAsset('widget', 'js', 'text/javascript; charset=utf-8', built.loaderJs);
        const cancelJs = browserAsset('cancel', 'js', 'text/javascript; charset=utf-8', built.cancelJs);
        const confirmJs = browserAsset('confirm', 'js', 'text/javascript; charset=utf-8', built.confirmJs);
        return { chatJs, chatCss, loaderJs, cancelJs, confirmJs, byName: new Map([chatJs, chatCss, cancelJs, confirmJs].map((a) => [a.name, a])) };
      },
      (error: unknown) => {
        // A failed build is retried on the next request rather than remembered.
        assets = undefined;
        throw error;
      },
    ));

  return {
    /** Builds the bundles ahead of the first visitor (a failure is logged; requests retry it). */
    warmUp: () =>
      loadAssets().then(
        () => undefined,
        (error: unknown) => deps.logger.error('web bundles failed to build', { error: String(error) }),
      ),
    matches: (path: string) =>
      path === '/' ||
      path.startsWith('/c/') ||
      path === '/widget.js' ||
      path === CANCEL_PAGE_PATH ||
      path === CONFIRM_PAGE_PATH ||
      path.startsWith(WEB_ASSETS_PATH),
    async handle(req: IncomingMessage, res: ServerResponse, _ctx: Context, url: URL): Promise<void> {
      if (req.method !== 'GET' && req.method !== 'HEAD') {
        return sendError(res, new AppError('METHOD_NOT_ALLOWED', 'Method not allowed', `${url.pathname} accepts GET, HEAD`), { Allow: 'GET, HEAD' });
      }
      const path = url.pathname;
      const host = await hostOf(req);
      if (host.kind === 'not_serving' || (host.kind === 'pending' && path === '/')) return sendPlain(req, res, 'NOT_FOUND', 'This domain is not active.');
      if (host.kind === 'misdirected') return sendPlain(req, res, 'MISDIRECTED_REQUEST', 'This hostname is not served here.');
      if (path === '/') return serveRoot(req, res, host);
      const built = await loadAssets();
      // The loader, the bundles and the cancellation page are the same for every owner: a custom domain serves
      // them too (its page at `/` needs the bundles; an owner may load the loader from their own domain).
      if (path === '/widget.js') return sendAsset(req, res, built.loaderJs, LOADER_CACHE_CONTROL);
      if (path === CANCEL_PAGE_PATH || path === CONFIRM_PAGE_PATH) {
        const headers = { 'Content-Type': 'text/html; charset=utf-8', 'Cache-Control': 'no-cache', ...hostedPageHeaders([]) };
        return send(req, res, 200, headers, path === CANCEL_PAGE_PATH ? cancelPageHtml(built) : confirmPageHtml(built));
      }
      if (path.startsWith(WEB_ASSETS_PATH)) {
        const asset = built.byName.get(path.slice(WEB_ASSETS_PATH.length));
        if (!asset) return sendError(res, new AppError('NOT_FOUND', 'Route not found', `${path} is not an asset`));
        return sendAsset(req, res, asset, IMMUTABLE_CACHE_CONTROL);
      }
      const slug = path.slice('/c/'.length).replace(/\/$/, '');
      // An owner's domain shows that owner's interface only: another slug there would put someone else's page
      // under their name (and their domain's cookies and reputation).
      if (host.kind === 'serving' && slug !== host.route.chatInterface.slug) {
        return sendPlain(req, res, 'NOT_FOUND', 'This page is not served at this domain.');
      }
      const page = SLUG.test(slug) ? await hostedPageOf(deps, slug) : undefined;
      const html = pageHtml(built, page, url.searchParams.get('embed') === '1');
      const headers = { 'Content-Type': 'text/html; charset=utf-8', 'Cache-Control': 'no-cache', ...hostedPageHeaders(page?.allowedOrigins ?? []) };
      send(req, res, page ? 200 : HTTP_STATUS.NOT_FOUND, headers, html);
    },
  };

  /**
   * What the Host of a request is to the visitor side: one of the service's own hosts, an active domain (its
   * route), a known domain that is not serving, or (when PUBLIC_ORIGINS names the service's hosts) a host nobody
   * registered. Without PUBLIC_ORIGINS an unknown host may be the service's own, so it is served as one; so is a
   * hostname only added (pending), except at `/`: anyone may add any name, and the service's own must not stop
   * serving pages because someone did.
   */
  async function hostOf(req: IncomingMessage) {
    const { hostname, problem } = normalizeHostname(String(req.headers.host ?? '').replace(/:\d+$/, ''));
    if (problem || serviceHosts.has(hostname)) return { kind: 'service' as const };
    const described = await deps.domainRoutes.describe(deps.database.db, hostname);
    if (serviceHosts.size > 0 && described.kind === 'pending') return { kind: 'not_serving' as const };
    if (described.kind === 'unknown') return serviceHosts.size > 0 ? { kind: 'misdirected' as const } : { kind: 'service' as const };
    return described;
  }

  /** The plain error page of a host that serves no chat here (never another owner's page). */
  function sendPlain(req: IncomingMessage, res: ServerResponse, status: 'NOT_FOUND' | 'MISDIRECTED_REQUEST', text: string) {
    const headers = { 'Content-Type': 'text/html; charset=utf-8', 'Cache-Control': 'no-cache', ...hostedPageHeaders([]) };
    send(req, res, HTTP_STATUS[status], headers, `<!doctype html><html lang="en"><meta charset="utf-8"><title>Not available</title><p>${text}</p></html>`);
  }

  /** `/` of an active custom domain is its interface's hosted page; the service's own hosts go to the API reference. */
  async function serveRoot(req: IncomingMessage, res: ServerResponse, host: Awaited<ReturnType<typeof hostOf>>): Promise<void> {
    if (host.kind === 'serving') {
      const { slug, name, allowedOrigins } = host.route.chatInterface;
      const headers = { 'Content-Type': 'text/html; charset=utf-8', 'Cache-Control': 'no-cache', ...hostedPageHeaders(allowedOrigins) };
      return send(req, res, 200, headers, pageHtml(await loadAssets(), { slug, name, allowedOrigins }, false));
    }
    res.writeHead(302, { Location: '/api/v1/docs' });
    res.end();
  }
}
