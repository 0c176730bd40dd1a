import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { buildService } from './build-service.mjs';

const PROJECT = fileURLToPath(new URL('..', import.meta.url));
const BUILD_SCRIPT = pathToFileURL(join(PROJECT, 'server/build-service.mjs')).href;
// Test builds go to folders of their own inside the project (the bundle's packages resolve from node_modules).
const roots: string[] = [];
function testBuildRoot(): string {
  mkdirSync(join(PROJECT, '.build'), { recursive: true });
  const root = mkdtempSync(join(PROJECT, '.build', 'test-'));
  roots.push(root);
  return root;
}
afterAll(() => {
  for (const root of roots) rmSync(root, { recursive: true, force: true });
});

/** `buildService` in a process of its own, as `npm start` runs it; resolves with the URL it printed. */
function buildInChild(buildRoot: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        `const { buildService } = await import(${JSON.stringify(BUILD_SCRIPT)}); console.log((await buildService({ buildRoot: ${JSON.stringify(buildRoot)} })).href);`,
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let out = '';
    let err = '';
    child.stdout.on('data', (c: Buffer) => (out += c));
    child.stderr.on('data', (c: Buffer) => (err += c));
    child.on('exit', (code) => (code === 0 ? resolve(out.trim()) : reject(new Error(`build failed (${code}): ${err}`))));
  });
}

const age = (path: string, minutes: number) => {
  const then = new Date(Date.now() - minutes * 60_000);
  utimesSync(path, then, then);
};

// The running service is exercised through this build by every child-server test (test/helpers/child-server.ts) and
// by CI's start-up smoke test; here, the build's own promises.
describe('buildService (npm start)', () => {
  it('two starts building the same sources at once write one complete folder and both use it', async () => {
    const root = testBuildRoot();
    const [first, second] = await Promise.all([buildInChild(root), buildInChild(root)]);
    expect(first).toBe(second);
    const folder = fileURLToPath(new URL('.', first));
    expect(readdirSync(folder).sort()).toEqual([
      'document-worker.mjs',
      'document-worker.mjs.map',
      'main.mjs',
      'main.mjs.map',
      'pglite-worker.mjs',
      'pglite-worker.mjs.map',
      'running',
    ]);
    expect(readdirSync(root).filter((name) => name.includes('.tmp-'))).toEqual([]);
  });

  it('keeps builds a live process started from and the four most recently started, and clears leftovers of killed starts', async () => {
    const root = testBuildRoot();
    const fake = (name: string, minutesAgo: number, runningPid?: number) => {
      const path = join(root, name);
      mkdirSync(join(path, 'running'), { recursive: true });
      writeFileSync(join(path, 'main.mjs'), '');
      if (runningPid !== undefined) writeFileSync(join(path, 'running', String(runningPid)), '');
      age(path, minutesAgo);
      return path;
    };
    const gonePid = spawnSync(process.execPath, ['-e', '']).pid!;
    const recent = [1, 2, 3, 4].map((m) => fake(`${'a'.repeat(15)}${m}`, m));
    const oldUnused = fake('b'.repeat(16), 60);
    const oldDeadUser = fake('c'.repeat(16), 70, gonePid);
    const oldInUse = fake('d'.repeat(16), 80, process.pid);
    const staleTemporary = join(root, `${'e'.repeat(16)}.tmp-1-abcd`);
    mkdirSync(staleTemporary);
    age(staleTemporary, 30);
    const freshTemporary = join(root, `${'f'.repeat(16)}.tmp-2-abcd`);
    mkdirSync(freshTemporary);

    const built = fileURLToPath(new URL('.', await buildService({ buildRoot: root })));
    expect(existsSync(join(built, 'running', String(process.pid)))).toBe(true);
    for (const kept of [...recent, oldInUse, freshTemporary]) expect(existsSync(kept), kept).toBe(true);
    for (const removed of [oldUnused, oldDeadUser, staleTemporary]) expect(existsSync(removed), removed).toBe(false);
    expect(readdirSync(root).filter((name) => name.includes('.trash-'))).toEqual([]);

    // Reusing a build counts as starting from it: it becomes the most recent, and is not the next one removed.
    age(built, 120);
    await buildService({ buildRoot: root });
    expect(Date.now() - statSync(built).mtimeMs).toBeLessThan(60_000);
  });

  it('points the workers (documents, the embedded database) at their precompiled builds, and every source-relative file at one that exists', async () => {
    const main = await buildService();
    const code = readFileSync(main, 'utf8');
    for (const worker of ['document-worker', 'pglite-worker']) {
      expect(code).toContain(`new URL("./${worker}.mjs", import.meta.url)`);
      expect(code).not.toMatch(new RegExp(`${worker}\\.ts`));
      expect(existsSync(fileURLToPath(new URL(`./${worker}.mjs`, main))), worker).toBe(true);
    }
    // Each source module's import.meta.url, rewritten relative to the bundle: the source file itself must be there.
    const sources = [...code.matchAll(/new URL\("(\.\.\/[^"]+)", import\.meta\.url\)\.href/g)].map((m) => m[1]!);
    expect(sources.length).toBeGreaterThan(5);
    for (const source of sources) expect(existsSync(fileURLToPath(new URL(source, main))), source).toBe(true);
    expect(sources).toContain('../../db/database.ts');
    // No module is left reading the bundle's own URL where it meant its source file's.
    expect(code.match(/import\.meta\.url/g)!.length).toBe(sources.length + 2);
  });
});
