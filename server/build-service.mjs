// The service precompiled for `npm start`: server/main.ts and the document worker bundled by esbuild into plain
// JavaScript under .build/, so that neither the request thread nor a parsing worker loads tsx or compiles TypeScript
// at run time. Measured on a fresh start: ~100 MB less on the request thread and ~60 MB less per parsing worker
// than under tsx. Tests and the benchmarks' in-process services keep running the sources through tsx and vitest.
//
// Plain JavaScript, because it runs before anything can load TypeScript.
import { createHash, randomBytes } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { build } from 'esbuild';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const BUILD_ROOT = join(ROOT, '.build');
/** Source entry → name of its output file. */
const ENTRIES = {
  'server/main.ts': 'main',
  'adapters/outbound/workers/document-worker.ts': 'document-worker',
};
/** Builds kept beside the current one: a service started from an older one may still start a worker from it. */
const KEEP_OLD_BUILDS = 4;

/** Stands for the bundle's own `import.meta.url` while the sources' uses are rewritten. */
const BUNDLE_URL = '__bundle_import_meta_url__';

const toPosix = (path) => path.split('\\').join('/');
const quote = (text) => `'${text.replaceAll('\\', '\\\\').replaceAll("'", "\\'")}'`;

/**
 * Keeps the sources' `import.meta.url` meaning what it meant: the module's own place in the source tree. Every
 * module of the bundle shares the bundle's URL, so a module that reads a file beside it (the PGlite initdb script,
 * the chat page's sources, the parser's samples) would look in .build/. Each use is rewritten to the source file's
 * URL, relative to the bundle, so the build stays movable with the checkout. One exception: `new URL('./x.ts',
 * import.meta.url)` naming another entry of this build (the document worker) points at that entry's output, so the
 * worker runs the precompiled code too.
 */
function sourceUrlPlugin(entryPaths) {
  return {
    name: 'source-import-meta-url',
    setup(pluginBuild) {
      pluginBuild.onLoad({ filter: /\.ts$/ }, (args) => {
        let contents = readFileSync(args.path, 'utf8');
        if (!contents.includes('import.meta.url')) return undefined;
        contents = contents.replace(/new URL\(\s*(['"])(\.{1,2}\/[^'"]+\.ts)\1\s*,\s*import\.meta\.url\s*\)/g, (whole, _q, target) => {
          const output = entryPaths.get(resolve(dirname(args.path), target));
          return output ? `new URL(${quote(`./${output}.mjs`)}, ${BUNDLE_URL})` : whole;
        });
        const fromBundle = toPosix(relative(BUILD_ROOT, args.path));
        // Bundles sit one folder below BUILD_ROOT (.build/<hash>/), hence the extra '../'.
        contents = contents
          .replace(/\bimport\.meta\.url\b/g, `new URL(${quote(`../${fromBundle}`)}, import.meta.url).href`)
          .replaceAll(BUNDLE_URL, 'import.meta.url');
        return { contents, loader: 'ts' };
      });
    },
  };
}

/**
 * Builds the service into .build/<hash of the output>/ and returns the URL of its main module. The same sources give
 * the same folder, written once (into a temporary folder, then renamed) so that services starting at the same time
 * never read a half-written build.
 */
export async function buildService() {
  const entryPaths = new Map(Object.entries(ENTRIES).map(([source, output]) => [join(ROOT, source), output]));
  const result = await build({
    entryPoints: Object.fromEntries(Object.entries(ENTRIES).map(([source, output]) => [output, join(ROOT, source)])),
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    packages: 'external',
    outdir: join(BUILD_ROOT, 'out'),
    outExtension: { '.js': '.mjs' },
    sourcemap: 'linked',
    write: false,
    logLevel: 'silent',
    plugins: [sourceUrlPlugin(entryPaths)],
  });
  const hash = createHash('sha256');
  for (const file of result.outputFiles) hash.update(relative(join(BUILD_ROOT, 'out'), file.path)).update(file.contents);
  const folder = join(BUILD_ROOT, hash.digest('hex').slice(0, 16));
  if (!exists(folder)) {
    const temporary = `${folder}.tmp-${process.pid}-${randomBytes(4).toString('hex')}`;
    rmSync(temporary, { recursive: true, force: true });
    for (const file of result.outputFiles) {
      const target = join(temporary, relative(join(BUILD_ROOT, 'out'), file.path));
      mkdirSync(dirname(target), { recursive: true });
      writeFileSync(target, file.contents);
    }
    try {
      renameSync(temporary, folder);
    } catch (error) {
      // Another start wrote the same build first: theirs is identical.
      rmSync(temporary, { recursive: true, force: true });
      if (!exists(folder)) throw error;
    }
  }
  pruneOldBuilds(folder);
  return pathToFileURL(join(folder, 'main.mjs'));
}

function exists(path) {
  try {
    statSync(path);
    return true;
  } catch {
    return false;
  }
}

function pruneOldBuilds(current) {
  const builds = readdirSync(BUILD_ROOT, { withFileTypes: true })
    .filter((entry) => entry.isDirectory() && /^[0-9a-f]{16}$/.test(entry.name) && join(BUILD_ROOT, entry.name) !== current)
    .map((entry) => ({ path: join(BUILD_ROOT, entry.name), mtime: statSync(join(BUILD_ROOT, entry.name)).mtimeMs }))
    .sort((a, b) => b.mtime - a.mtime);
  for (const old of builds.slice(KEEP_OLD_BUILDS)) rmSync(old.path, { recursive: true, force: true });
}
