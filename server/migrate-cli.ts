import { ConfigError, loadConfig } from '../schema/config.ts';
import { openDatabase } from './app.ts';
import { migrateToLatest } from '../db/migrate.ts';

try {
  const config = loadConfig();
  const database = await openDatabase(config);
  const applied = await migrateToLatest(database.db);
  process.stdout.write(applied.length ? `applied: ${applied.join(', ')}\n` : 'database is up to date\n');
  await database.close();
} catch (error) {
  process.stderr.write(`${error instanceof ConfigError ? error.message : `migration failed: ${(error as Error).message}`}\n`);
  process.exit(1);
}
