import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { buildService } from './build-service.mjs';

// The running service is exercised through this build by every child-server test (test/helpers/child-server.ts) and
// by CI's start-up smoke test; here, the build's own promises.
describe('buildService (npm start)', () => {
  it('builds the same sources into one folder, also when two starts build at once', async () => {
    const [first, second] = await Promise.all([buildService(), buildService()]);
    expect(first.href).toBe(second.href);
    expect(first.pathname).toMatch(/\/\.build\/[0-9a-f]{16}\/main\.mjs$/);
    expect(existsSync(new URL('./document-worker.mjs', first))).toBe(true);
    expect((await buildService()).href).toBe(first.href);
  });

  it('points the document worker at its precompiled build, and every source-relative file at one that exists', async () => {
    const main = await buildService();
    const code = readFileSync(main, 'utf8');
    expect(code).toContain('new URL("./document-worker.mjs", import.meta.url)');
    expect(code).not.toMatch(/document-worker\.ts/);
    // Each source module's import.meta.url, rewritten relative to the bundle: the source file itself must be there.
    const sources = [...code.matchAll(/new URL\("(\.\.\/[^"]+)", import\.meta\.url\)\.href/g)].map((m) => m[1]!);
    expect(sources.length).toBeGreaterThan(5);
    for (const source of sources) expect(existsSync(fileURLToPath(new URL(source, main))), source).toBe(true);
    expect(sources).toContain('../../db/database.ts');
    // No module is left reading the bundle's own URL where it meant its source file's.
    expect(code.match(/import\.meta\.url/g)!.length).toBe(sources.length + 1);
  });
});
