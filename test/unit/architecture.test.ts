import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * SQL lives only in repositories: under routers/, adapters/ and server/, a file that is not `*repository.ts` (or a
 * test) builds no query
 * and writes no raw SQL; it asks its area's repository, and another area asks that area's repository.
 * `.transaction()` may stay where a procedure or job coordinates one (the outbox's withEvents, an ingestion's
 * final commit): every statement inside comes from a repository function given the transaction, which the
 * patterns below enforce, since any query written inline would match them.
 */
const ROOT = join(import.meta.dirname, '../..');
const SQL_PATTERNS: Array<[string, RegExp]> = [
  ['.selectFrom(', /\.selectFrom\(/],
  ['.insertInto(', /\.insertInto\(/],
  ['.updateTable(', /\.updateTable\(/],
  ['.deleteFrom(', /\.deleteFrom\(/],
  ['.replaceInto(', /\.replaceInto\(/],
  ['.mergeInto(', /\.mergeInto\(/],
  ['.selectNoFrom(', /\.selectNoFrom\(/],
  ['sql`…` or sql<T>`…`', /\bsql(<[^`]*?>)?`/],
  ['sql.raw/ref/lit/id/join/table/val', /\bsql\.(raw|ref|lit|id|join|table|val)\(/],
  ["the sql tag imported from 'kysely'", /import\s*\{[^}]*\bsql\b[^}]*\}\s*from\s*'kysely'/],
];

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.name.endsWith('.ts') ? [path] : [];
  });
}

function sqlOutsideRepositories(files: Array<{ path: string; text: string }>): string[] {
  const found: string[] = [];
  for (const { path, text } of files) {
    if (/repository\.ts$|\.test\.ts$/.test(path)) continue;
    for (const [name, pattern] of SQL_PATTERNS) if (pattern.test(text)) found.push(`${path}: ${name}`);
  }
  return found;
}

describe('architecture', () => {
  it('no SQL under routers/, adapters/ or server/ outside *repository.ts', () => {
    const files = ['routers', 'adapters', 'server']
      .flatMap((dir) => sourceFiles(join(ROOT, dir)))
      .map((path) => ({ path: relative(ROOT, path), text: readFileSync(path, 'utf8') }));
    expect(files.length).toBeGreaterThan(200);
    expect(sqlOutsideRepositories(files)).toEqual([]);
  });

  it('the check catches each kind of SQL, and lets repositories, tests and transactions be', () => {
    const offending = [
      "await db.selectFrom('owners').selectAll().execute();",
      "await trx.insertInto('jobs').values(row).execute();",
      "await db.updateTable('owners').set({ plan }).execute();",
      "await db.deleteFrom('sessions').execute();",
      'await sql`select 1`.execute(db);',
      'const { rows } = await sql<{ n: number }>`select 1 as n`.execute(db);',
      "const column = sql.ref('payload');",
      "import { sql, type Kysely } from 'kysely';",
    ];
    for (const text of offending) expect(sqlOutsideRepositories([{ path: 'routers/area/router.ts', text }]), text).toHaveLength(1);
    const allowed = "await db.selectFrom('owners').selectAll().execute();";
    expect(sqlOutsideRepositories([{ path: 'routers/area/repository.ts', text: allowed }])).toEqual([]);
    expect(sqlOutsideRepositories([{ path: 'routers/area/search-repository.ts', text: allowed }])).toEqual([]);
    expect(sqlOutsideRepositories([{ path: 'routers/area/router.test.ts', text: allowed }])).toEqual([]);
    const coordinated = 'await db.transaction().execute(async (trx) => { await repo.insertThing(trx, thing); });';
    expect(sqlOutsideRepositories([{ path: 'routers/area/router.ts', text: coordinated }])).toEqual([]);
  });

  it('no global fetch in product code: outbound calls go through the guarded client (the layer rules check the modules)', () => {
    // graphiql.ts holds browser code in a string: that fetch runs in the owner's browser, against our own origin.
    const browserCode = new Set(['adapters/inbound/graphql/graphiql.ts']);
    const found = ['routers', 'adapters', 'server', 'schema', 'db']
      .flatMap((dir) => sourceFiles(join(ROOT, dir)))
      .map((path) => relative(ROOT, path))
      .filter((path) => !path.endsWith('.test.ts') && !browserCode.has(path))
      .filter((path) => /(^|[^.\w])fetch\(|globalThis\.fetch\b|new WebSocket\(/m.test(readFileSync(join(ROOT, path), 'utf8')));
    expect(found).toEqual([]);
  });
});
