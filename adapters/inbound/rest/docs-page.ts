import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { assetUrl, browserAsset, browserPageSecurityHeaders, type BrowserAsset } from '../browser-assets.ts';

/**
 * The API reference at /api/v1/docs: Swagger UI (swagger-ui-dist) rendering our OpenAPI document, with
 * "try it" sending requests to this same origin. Its bundle and stylesheet are served from memory under
 * content-hashed names, so the page needs no CDN; its one inline script is allowed by its hash.
 */

interface DocsAssets {
  readonly script: BrowserAsset;
  readonly style: BrowserAsset;
  readonly icon: BrowserAsset;
  readonly byName: ReadonlyMap<string, BrowserAsset>;
}

let assets: DocsAssets | undefined;

/** Read on first use, then kept: about 1.5 MB that most instances never serve. */
function docsAssets(): DocsAssets {
  if (assets) return assets;
  const dist = dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'));
  const read = (file: string) => readFileSync(join(dist, file));
  const script = browserAsset('swagger-ui-bundle', 'js', 'text/javascript; charset=utf-8', read('swagger-ui-bundle.js'));
  const style = browserAsset('swagger-ui', 'css', 'text/css; charset=utf-8', read('swagger-ui.css'));
  const icon = browserAsset('favicon', 'png', 'image/png', read('favicon-32x32.png'));
  assets = { script, style, icon, byName: new Map([script, style, icon].map((a) => [a.name, a])) };
  return assets;
}

export const docsAsset = (name: string): BrowserAsset | undefined => docsAssets().byName.get(name);

/**
 * The document is embedded in the start-up script: the page is whole in one answer and always shows the same
 * document it was built with. Without the standalone preset (its top bar loads any URL typed into it);
 * validatorUrl null, or the page would send the document to swagger.io's validator.
 */
function startScript(openapi: object): string {
  // `<` escaped so that no string in the document can close the script element.
  const spec = JSON.stringify(openapi).replace(/</g, '\\u003c');
  return (
    `window.ui = SwaggerUIBundle({ spec: ${spec}, dom_id: '#swagger-ui', deepLinking: true, validatorUrl: null, ` +
    "presets: [SwaggerUIBundle.presets.apis], layout: 'BaseLayout' });"
  );
}

export function renderDocsPage(openapi: object): { contentType: string; body: string; headers: Record<string, string>; gzip: () => Buffer } {
  const { script, style, icon } = docsAssets();
  const start = startScript(openapi);
  const body = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>API reference</title>
<link rel="icon" type="image/png" href="${assetUrl(icon)}">
<link rel="stylesheet" href="${assetUrl(style)}">
</head>
<body>
<div id="swagger-ui"></div>
<script src="${assetUrl(script)}"></script>
<script>${start}</script>
</body>
</html>
`;
  let zipped: Buffer | undefined;
  // The embedded document makes the page a few hundred kilobytes of JSON, which compresses about twentyfold.
  return { contentType: 'text/html; charset=utf-8', body, headers: browserPageSecurityHeaders([start]), gzip: () => (zipped ??= gzipSync(body)) };
}
