import { createHash } from 'node:crypto';
import { gzipSync } from 'node:zlib';

/**
 * Files that the browser pages (the REST reference, GraphiQL) load, all from our own npm dependencies so that
 * an offline deployment works. Each is named by its content hash: the URL changes whenever the file does, so
 * browsers may keep it for a year without ever seeing a stale copy.
 */
export const BROWSER_ASSETS_PATH = '/api/v1/docs/assets/';

export const IMMUTABLE_CACHE_CONTROL = 'public, max-age=31536000, immutable';

export interface BrowserAsset {
  /** The hashed file name, e.g. `swagger-ui-bundle.3f2a9c01d4e5.js`. */
  readonly name: string;
  readonly contentType: string;
  readonly body: Buffer;
  /** Compressed once on first use: the bundles are megabytes and compress about four to one. */
  gzip(): Buffer;
  readonly etag: string;
}

export function browserAsset(baseName: string, extension: string, contentType: string, body: Buffer): BrowserAsset {
  const hash = createHash('sha256').update(body).digest('hex').slice(0, 16);
  let gzipped: Buffer | undefined;
  return {
    name: `${baseName}.${hash}.${extension}`,
    contentType,
    body,
    gzip: () => (gzipped ??= gzipSync(body)),
    etag: `"${hash}"`,
  };
}

export const assetUrl = (asset: BrowserAsset) => `${BROWSER_ASSETS_PATH}${asset.name}`;

/**
 * The pages' policy: scripts from this origin (plus, by hash, a page's own inline start-up script), styles and
 * fonts only from this origin (data: URLs for the fonts and icons the libraries' stylesheets embed), requests
 * only to this origin (try-it, GraphQL queries), no plugins, no framing (a page that sends authenticated
 * requests must not be clickjacked inside another site).
 */
export function browserPageSecurityHeaders(inlineScripts: readonly string[] = []): Record<string, string> {
  const hashes = inlineScripts.map((script) => `'sha256-${createHash('sha256').update(script).digest('base64')}'`);
  return {
    'Content-Security-Policy':
      `default-src 'none'; script-src ${[...hashes, "'self'"].join(' ')}; style-src 'self'; ` +
      `img-src 'self' data:; font-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'`,
    'X-Frame-Options': 'DENY',
    'Referrer-Policy': 'no-referrer',
  };
}
