import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import postgres from 'postgres';
import type { TestProject } from 'vitest/node';
import { dumpPGlite, openPGlite, openPostgres } from '../../db/database.ts';
import { migrateToLatest } from '../../db/migrate.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    pgliteTemplate: string;
    postgresTemplate: string;
  }
}

/**
 * Migrates once per run: a PGlite data-directory dump that each test file loads (PGlite takes seconds to
 * boot and migrate from scratch), or a PostgreSQL template database each test file clones.
 */
export default async function setup(project: TestProject) {
  const databaseUrl = process.env.DATABASE_URL;
  if (databaseUrl) {
    const template = `cis_tmpl_${randomBytes(4).toString('hex')}`;
    const admin = postgres(databaseUrl, { max: 1, onnotice: () => {} });
    await admin.unsafe(`create database ${template}`);
    const url = new URL(databaseUrl);
    url.pathname = `/${template}`;
    const database = openPostgres(url.toString(), 1);
    await migrateToLatest(database.db);
    await database.close();
    project.provide('postgresTemplate', template);
    project.provide('pgliteTemplate', '');
    return async () => {
      await admin.unsafe(`drop database if exists ${template} with (force)`);
      await admin.end();
    };
  }
  const dir = mkdtempSync(join(tmpdir(), 'cis-template-'));
  const database = await openPGlite({});
  await migrateToLatest(database.db);
  const dump = await dumpPGlite(database);
  const file = join(dir, 'template.tar.gz');
  writeFileSync(file, Buffer.from(await dump.arrayBuffer()));
  await database.close();
  project.provide('pgliteTemplate', file);
  project.provide('postgresTemplate', '');
  return () => rmSync(dir, { recursive: true, force: true });
}
