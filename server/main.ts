import { ConfigError, loadConfig } from '../schema/config.ts';
import { startApp } from './app.ts';
import { createLogger } from '../adapters/outbound/logger.ts';

async function main() {
  let config;
  try {
    config = loadConfig();
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`${error.message}\n`);
      process.exit(1);
    }
    throw error;
  }
  const logger = createLogger(config.LOG_LEVEL);
  const app = await startApp(config, { logger });
  // `npm start` is the whole set-up: the chat page's bundles are built here, in memory, never committed.
  await app.warmUp();
  logger.info('listening', {
    pid: process.pid,
    url: `https://${config.HOST === '0.0.0.0' ? 'localhost' : config.HOST}:${app.port}`,
    database: app.deps.database.kind,
    rateLimits: config.REDIS_URL ? 'redis' : 'memory',
  });

  const shutdown = (signal: string) => {
    logger.info('shutting down', { signal });
    const timer = setTimeout(() => process.exit(1), 10_000);
    timer.unref();
    app.close().then(
      () => process.exit(process.exitCode ?? 0),
      (error: unknown) => {
        logger.error('shutdown failed', { reason: String(error) });
        process.exit(1);
      },
    );
  };
  // A database that is gone for good leaves nothing to serve: stopping lets the supervisor start the service again,
  // which re-opens the data directory (what was committed is there) and re-claims any job that was running.
  void app.deps.database.stopped?.then((error) => {
    logger.error('the database stopped; shutting down', { reason: error.message });
    process.exitCode = 1;
    shutdown('database stopped');
  });
  process.once('SIGINT', () => shutdown('SIGINT'));
  process.once('SIGTERM', () => shutdown('SIGTERM'));
}

main().catch((error: unknown) => {
  process.stderr.write(`start-up failed: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
