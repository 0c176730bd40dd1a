import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import type { Config } from './config.ts';
import { createLogger, type Logger } from './logger.ts';
import { createSecretBox, loadEncryptionKey } from './secrets.ts';
import { loadTlsMaterial } from './tls.ts';
import { createDualListener } from './listener.ts';
import { createDispatcher } from './dispatch.ts';
import { createErrorReporter } from './error-reporting.ts';
import { createMemoryRateLimiter } from './rate-limit/memory.ts';
import { createRedisRateLimiter } from './rate-limit/redis.ts';
import { withFallback } from './rate-limit/fallback.ts';
import { openPGlite, openPostgres, type Database } from '../db/database.ts';
import { migrateToLatest } from '../db/migrate.ts';
import { appRouter } from '../routers/app-router.ts';
import type { AppDeps } from '../routers/context.ts';
import { createSessionManager } from '../routers/auth/sessions.ts';
import { createGuardedHttpClient } from '../adapters/http/guarded-client.ts';
import { createRestHandler } from '../adapters/rest/handler.ts';
import { LEGACY_ROUTES } from '../adapters/rest/legacy.ts';
import { buildOpenApiDocument } from '../adapters/rest/openapi.ts';
import { renderDocsPage } from '../adapters/rest/docs-page.ts';
import { createTrpcHandler } from '../adapters/trpc/handler.ts';
import { createGraphqlHandler } from '../adapters/graphql/handler.ts';
import { createDirectoryBlobStore } from '../adapters/blobs/blob-store.ts';
import { createJobQueue } from './jobs/queue.ts';
import { detectVectorSearch } from '../routers/knowledge-base/vectors.ts';
import { knowledgeBaseJobHandlers, requeueOrphanedDocuments } from '../routers/knowledge-base/jobs.ts';
import { webhookJobHandlers } from '../routers/webhooks/delivery.ts';
import { sweepOrphanedDeliveries } from '../routers/webhooks/sweeper.ts';
import { createApiKeyCache } from '../routers/api-keys/key-cache.ts';
import { API_KEY_CHANGES_CHANNEL } from '../db/migrations/0006_api_key_change_notify.ts';

/** Validated API keys kept per instance (a few hundred bytes each). */
const API_KEY_CACHE_MAX_ENTRIES = 10_000;

export interface RunningApp {
  deps: AppDeps;
  port: number;
  /** https://127.0.0.1:<port> */
  url: string;
  close(): Promise<void>;
}

export async function openDatabase(config: Config): Promise<Database> {
  return config.DATABASE_URL ? openPostgres(config.DATABASE_URL) : openPGlite({ dataDir: join(config.DATA_DIR, 'pglite') });
}

/**
 * Builds every dependency once, runs migrations, and starts the one listener. `database` may be handed
 * in (tests pass a per-file clone); everything else comes from the configuration.
 */
export async function startApp(config: Config, options: { database?: Database; logger?: Logger } = {}): Promise<RunningApp> {
  const logger = options.logger ?? createLogger(config.LOG_LEVEL);
  const database = options.database ?? (await openDatabase(config));
  await migrateToLatest(database.db);
  const http = createGuardedHttpClient({ allowHosts: config.OUTBOUND_ALLOW_HOSTS });
  const rateLimiter = config.REDIS_URL
    ? withFallback(createRedisRateLimiter({ url: config.REDIS_URL, keyPrefix: config.RATE_LIMIT_KEY_PREFIX }), createMemoryRateLimiter(), logger)
    : createMemoryRateLimiter();
  const deps: AppDeps = {
    config,
    database,
    logger,
    http,
    rateLimiter,
    secrets: createSecretBox(loadEncryptionKey(config.ENCRYPTION_KEY, config.DATA_DIR)),
    sessions: createSessionManager(database.db, config.SESSION_TTL_DAYS),
    errorReporter: createErrorReporter({ logger, http, sentryDsn: config.SENTRY_DSN }),
    blobs: createDirectoryBlobStore(join(config.DATA_DIR, 'blobs')),
    jobs: createJobQueue({ db: database.db, logger }),
    webhookJobs: createJobQueue({ db: database.db, logger }),
    vectorSearch: await detectVectorSearch(database.db, config.VECTOR_SEARCH),
    apiKeyCache: createApiKeyCache({ ttlMs: config.API_KEY_CACHE_TTL_MS, maxEntries: API_KEY_CACHE_MAX_ENTRIES }),
  };
  const cache = deps.apiKeyCache;
  const stopListening = await database.listen(API_KEY_CHANGES_CHANNEL, {
    onNotify: () => cache.invalidate(),
    onListening: () => cache.setLive(true),
    onLost: () => {
      cache.setLive(false);
      logger.warn('lost the database connection that listens for API-key changes; the key cache is off until it is back');
    },
  });
  const sweepers: Array<ReturnType<typeof setInterval>> = [];
  if (config.JOB_CONCURRENCY > 0) {
    deps.jobs.start(knowledgeBaseJobHandlers(deps), { concurrency: config.JOB_CONCURRENCY, leaseMs: config.JOB_LEASE_MS, onlyHandledKinds: true });
    await requeueOrphanedDocuments(deps);
    // Also while running: a job can die (its last lease ran out) long after start-up.
    const sweeper = setInterval(() => {
      requeueOrphanedDocuments(deps).catch((error: unknown) => logger.warn('document sweep failed', { reason: String(error) }));
    }, Math.max(config.JOB_LEASE_MS, 30_000));
    sweeper.unref();
    sweepers.push(sweeper);
  }

  if (config.WEBHOOK_CONCURRENCY > 0) {
    const handlers = webhookJobHandlers({ db: database.db, http, secrets: deps.secrets, logger, jobs: deps.webhookJobs, timeoutMs: config.WEBHOOK_TIMEOUT_MS, now: () => new Date() });
    deps.webhookJobs.start(handlers, { concurrency: config.WEBHOOK_CONCURRENCY, leaseMs: config.JOB_LEASE_MS, onlyHandledKinds: true });
    const sweep = () => sweepOrphanedDeliveries(database.db, deps.webhookJobs).catch((error: unknown) => logger.warn('webhook delivery sweep failed', { reason: String(error) }));
    await sweep();
    const sweeper = setInterval(sweep, Math.max(config.JOB_LEASE_MS, 30_000));
    sweeper.unref();
    sweepers.push(sweeper);
  }

  let openapi: ReturnType<typeof buildOpenApiDocument> | undefined;
  const openApiDocument = () =>
    (openapi ??= buildOpenApiDocument(appRouter, {
      title: 'Chat Interface and Knowledge Base Service API',
      version: '1.0.0',
      description: 'The v1 REST surface. Every operation is also reachable as a tRPC procedure (/trpc) and, for dashboards, through GraphQL (/graphql).',
    }));
  let docsPage: string | undefined;
  const rest = createRestHandler({
    router: appRouter,
    legacyRoutes: LEGACY_ROUTES,
    jsonBodyLimitBytes: config.JSON_BODY_LIMIT_BYTES,
    documents: {
      '/api/v1/openapi.json': () => ({ contentType: 'application/json; charset=utf-8', body: JSON.stringify(openApiDocument()) }),
      '/api/v1/docs': () => ({ contentType: 'text/html; charset=utf-8', body: (docsPage ??= renderDocsPage(openApiDocument())) }),
    },
  });
  const dispatch = createDispatcher(deps, {
    rest,
    trpc: createTrpcHandler(appRouter, config.JSON_BODY_LIMIT_BYTES),
    graphql: createGraphqlHandler(appRouter, config.JSON_BODY_LIMIT_BYTES),
  });
  const tls = await loadTlsMaterial({ certPath: config.TLS_CERT, keyPath: config.TLS_KEY, dataDir: config.DATA_DIR });
  const listener = createDualListener(tls, dispatch);
  await new Promise<void>((resolve, reject) => {
    listener.server.once('error', reject);
    listener.server.listen(config.PORT, config.HOST, () => resolve());
  });
  const port = (listener.server.address() as AddressInfo).port;

  let closing: Promise<void> | undefined;
  return {
    deps,
    port,
    url: `https://127.0.0.1:${port}`,
    close: () =>
      (closing ??= (async () => {
        const closed = new Promise<void>((resolve) => listener.server.close(() => resolve()));
        listener.closeConnections();
        await closed;
        for (const sweeper of sweepers) clearInterval(sweeper);
        // Within main.ts's 10 s shutdown bound: handlers still running after 8 s are released, not left leased.
        await Promise.all([deps.jobs.stop(8_000), deps.webhookJobs.stop(8_000)]);
        await rateLimiter.close();
        await stopListening();
        await database.close();
      })()),
  };
}
