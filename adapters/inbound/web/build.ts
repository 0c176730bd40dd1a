import { fileURLToPath } from 'node:url';
import { build, type BuildOptions, type BuildResult } from 'esbuild';
import type { WebBundles } from './handler.ts';

const source = (path: string) => fileURLToPath(new URL(`../../../web/${path}`, import.meta.url));

/**
 * Bundles the browser code (web/) in memory with esbuild: the chat page (Preact) with its stylesheet, and the
 * dependency-free loader. Built when the service starts, never written to disk or committed, so what runs is
 * always what the source says. Browsers from 2020 on (ES2020) are supported.
 */
export async function buildWebAssets(): Promise<WebBundles> {
  const common: BuildOptions = {
    bundle: true,
    minify: true,
    write: false,
    format: 'iife',
    target: ['es2020'],
    legalComments: 'none',
    logLevel: 'silent',
    define: { 'process.env.NODE_ENV': '"production"' },
  };
  const [chat, loader, cancel, confirm] = await Promise.all([
    build({
      ...common,
      entryPoints: { chat: source('chat/main.tsx') },
      jsx: 'automatic',
      jsxImportSource: 'preact',
      outdir: 'out',
    }),
    build({ ...common, entryPoints: { widget: source('widget/loader.ts') }, outdir: 'out' }),
    build({ ...common, entryPoints: { cancel: source('bookings/cancel.ts') }, outdir: 'out' }),
    build({ ...common, entryPoints: { confirm: source('support/confirm.ts') }, outdir: 'out' }),
  ]);
  const file = (result: BuildResult, extension: string) => {
    const found = result.outputFiles?.find((f) => f.path.endsWith(extension));
    if (!found) throw new Error(`the web build produced no ${extension} file`);
    return Buffer.from(found.contents);
  };
  return {
    chatJs: file(chat, '.js'),
    chatCss: file(chat, '.css'),
    loaderJs: file(loader, '.js'),
    cancelJs: file(cancel, '.js'),
    confirmJs: file(confirm, '.js'),
  };
}
