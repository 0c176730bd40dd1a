// The service precompiled for `npm start`: server/main.ts and its two workers (documents, the embedded database)
// bundled by esbuild into plain JavaScript under .build/, so that no thread loads tsx or compiles TypeScript at run
// time. Measured on a fresh start: ~100 MB less on the request thread and ~60 MB less per parsing worker
// than under tsx. Tests and the benchmarks' in-process services keep running the sources through tsx and vitest.
//
// Plain JavaScript, because it runs before anything can load TypeScript.
import { createHash, randomBytes } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { build } from 'esbuild';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const DEFAULT_BUILD_ROOT = join(ROOT, '.build');
/** Source entry → name of its output file. */
const ENTRIES = {
  'server/main.ts': 'main',
  'adapters/outbound/workers/document-worker.ts': 'document-worker',
  'db/pglite-worker.ts': 'pglite-worker',
};
/** Builds no running service uses, kept beside the current one (the most recently started first). */
const KEEP_OLD_BUILDS = 4;
/** Temporary and half-removed folders older than this were left by a start or a prune that was killed. */
const STALE_LEFTOVER_MS = 10 * 60_000;

/** Stands for the bundle's own `import.meta.url` while the sources' uses are rewritten. */
const BUNDLE_URL = '__bundle_import_meta_url__';

const toPosix = (path) => path.split('\\').join('/');
const quote = (text) => `'${text.replaceAll('\\', '\\\\').replaceAll("'", "\\'")}'`;

/**
 * Keeps the sources' `import.meta.url` meaning what it meant: the module's own place in the source tree. Every
 * module of the bundle shares the bundle's URL, so a module that reads a file beside it (the PGlite initdb script,
 * the chat page's sources, the parser's samples) would look in the build folder. Each use is rewritten to the source
 * file's URL, relative to the bundle, so the build stays movable with the checkout. One exception: `new URL('./x.ts',
 * import.meta.url)` naming another entry of this build (the document worker) points at that entry's output, so the
 * worker runs the precompiled code too.
 */
function sourceUrlPlugin(entryPaths, buildRoot) {
  // Bundles sit one folder below the build root (<root>/<hash>/): paths are relative to any such folder.
  const bundleFolder = join(buildRoot, 'bundle');
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
        const fromBundle = toPosix(relative(bundleFolder, args.path));
        contents = contents.replace(/\bimport\.meta\.url\b/g, `new URL(${quote(fromBundle)}, import.meta.url).href`).replaceAll(BUNDLE_URL, 'import.meta.url');
        return { contents, loader: 'ts' };
      });
    },
  };
}

/**
 * Builds the service into <buildRoot>/<hash of the output>/ and returns the URL of its main module. The same sources
 * give the same folder, written once (into a temporary folder, then renamed) so that services starting at the same
 * time never read a half-written build. The folder is marked as used by this process: a parsing worker started later
 * (on demand, or to replace one that was stopped) loads its module from it, so no other start removes it while this
 * process lives. `buildRoot` must be inside the project, where the bundle's packages resolve from node_modules.
 */
export async function buildService({ buildRoot = DEFAULT_BUILD_ROOT } = {}) {
  const entryPaths = new Map(Object.entries(ENTRIES).map(([source, output]) => [join(ROOT, source), output]));
  const outdir = join(buildRoot, 'out');
  const result = await build({
    entryPoints: Object.fromEntries(Object.entries(ENTRIES).map(([source, output]) => [output, join(ROOT, source)])),
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    packages: 'external',
    outdir,
    outExtension: { '.js': '.mjs' },
    sourcemap: 'linked',
    write: false,
    logLevel: 'silent',
    plugins: [sourceUrlPlugin(entryPaths, buildRoot)],
  });
  const hash = createHash('sha256');
  for (const file of result.outputFiles) hash.update(relative(outdir, file.path)).update(file.contents);
  const folder = join(buildRoot, hash.digest('hex').slice(0, 16));
  if (!exists(folder)) {
    const temporary = `${folder}.tmp-${process.pid}-${randomBytes(4).toString('hex')}`;
    for (const file of result.outputFiles) {
      const target = join(temporary, relative(outdir, file.path));
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
  mkdirSync(join(folder, 'running'), { recursive: true });
  writeFileSync(join(folder, 'running', String(process.pid)), '');
  const now = new Date();
  utimesSync(folder, now, now);
  pruneOldBuilds(buildRoot, folder);
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

function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return error.code === 'EPERM';
  }
}

/** Whether a live process started from this build; the marks of processes that have gone are removed. */
function inUse(folder) {
  let used = false;
  const marks = join(folder, 'running');
  if (!exists(marks)) return false;
  for (const name of readdirSync(marks)) {
    if (alive(Number(name))) used = true;
    else rmSync(join(folder, 'running', name), { force: true });
  }
  return used;
}

/**
 * Best effort, never failing a start: removes builds beyond the KEEP_OLD_BUILDS most recently started that no live
 * process uses, and leftovers of killed starts and prunes. A build is renamed before it is removed, so that a prune
 * killed midway never leaves a half-removed folder under a build's name.
 */
function pruneOldBuilds(buildRoot, current) {
  const attempt = (fn) => {
    try {
      return fn();
    } catch {
      return undefined;
    }
  };
  const entries = attempt(() => readdirSync(buildRoot, { withFileTypes: true })) ?? [];
  const builds = [];
  for (const entry of entries) {
    const path = join(buildRoot, entry.name);
    if (!entry.isDirectory() || path === current) continue;
    const mtime = attempt(() => statSync(path).mtimeMs);
    if (mtime === undefined) continue;
    if (/\.(tmp|trash)-/.test(entry.name)) {
      if (Date.now() - mtime > STALE_LEFTOVER_MS) attempt(() => rmSync(path, { recursive: true, force: true }));
    } else if (/^[0-9a-f]{16}$/.test(entry.name)) builds.push({ path, mtime });
  }
  builds.sort((a, b) => b.mtime - a.mtime);
  for (const old of builds.slice(KEEP_OLD_BUILDS)) {
    if (attempt(() => inUse(old.path)) !== false) continue;
    const trash = `${old.path}.trash-${randomBytes(4).toString('hex')}`;
    const renamed = attempt(() => {
      renameSync(old.path, trash);
      return true;
    });
    if (renamed) attempt(() => rmSync(trash, { recursive: true, force: true }));
  }
}
