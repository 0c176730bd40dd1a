import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { assetUrl, browserAsset, browserPageSecurityHeaders, type BrowserAsset } from '../browser-assets.ts';

/**
 * GraphiQL for browsers at /graphql. graphiql 4 ships ES modules for bundlers (and React 19 ships no browser
 * build), so graphiql, React and react-dom from node_modules are bundled once with esbuild, in memory, the
 * first time a browser asks for the explorer: nothing built is committed or written to disk, and instances
 * that never serve it never pay for it. graphiql 4 is the line that edits with CodeMirror 5; graphiql 5 moved
 * to Monaco, which needs web workers and inserts <style> elements that a strict style-src refuses.
 */

export const GRAPHIQL_SECURITY_HEADERS = browserPageSecurityHeaders();

/** The browser entry: our own fetcher (same origin, the headers typed into GraphiQL's header editor). */
const ENTRY = `
import { createElement } from 'react';
import { createRoot } from 'react-dom/client';
import { GraphiQL } from 'graphiql';
import 'graphiql/style.css';

async function fetcher(params, options) {
  const response = await fetch('/graphql', {
    method: 'POST',
    headers: { ...options?.headers, 'Content-Type': 'application/json', Accept: 'application/graphql-response+json, application/json' },
    body: JSON.stringify(params),
  });
  return response.json();
}

// Style properties set from script are not inline styles to the policy; GraphiQL fills its container.
const container = document.getElementById('graphiql');
document.body.style.margin = '0';
container.style.height = '100vh';
createRoot(container).render(createElement(GraphiQL, { fetcher }));
`;

interface GraphiqlAssets {
  readonly script: BrowserAsset;
  readonly style: BrowserAsset;
  readonly byName: ReadonlyMap<string, BrowserAsset>;
}

async function buildAssets(): Promise<GraphiqlAssets> {
  const result = await build({
    stdin: { contents: ENTRY, resolveDir: dirname(fileURLToPath(import.meta.url)), sourcefile: 'graphiql-entry.js', loader: 'js' },
    bundle: true,
    minify: true,
    format: 'iife',
    platform: 'browser',
    target: 'es2020',
    define: { 'process.env.NODE_ENV': '"production"' },
    outdir: 'graphiql',
    entryNames: 'graphiql',
    write: false,
    logLevel: 'silent',
  });
  const output = (extension: string) => {
    const file = result.outputFiles.find((f) => f.path.endsWith(`.${extension}`));
    if (!file) throw new Error(`the GraphiQL build produced no .${extension} file`);
    return Buffer.from(file.contents);
  };
  const script = browserAsset('graphiql', 'js', 'text/javascript; charset=utf-8', output('js'));
  const style = browserAsset('graphiql', 'css', 'text/css; charset=utf-8', output('css'));
  return { script, style, byName: new Map([script, style].map((a) => [a.name, a])) };
}

let assets: Promise<GraphiqlAssets> | undefined;

/** Built once; a failed build is forgotten so that the next request tries again. */
function graphiqlAssets(): Promise<GraphiqlAssets> {
  assets ??= buildAssets().catch((error: unknown) => {
    assets = undefined;
    throw error;
  });
  return assets;
}

export async function graphiqlAsset(name: string): Promise<BrowserAsset | undefined> {
  // Only names this build could have produced start a build: a stray request for another file costs nothing.
  if (!name.startsWith('graphiql.')) return undefined;
  return (await graphiqlAssets()).byName.get(name);
}

export async function renderGraphiqlPage(): Promise<string> {
  const { script, style } = await graphiqlAssets();
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>GraphiQL</title>
<link rel="stylesheet" href="${assetUrl(style)}">
</head>
<body>
<div id="graphiql"></div>
<script src="${assetUrl(script)}"></script>
</body>
</html>
`;
}
