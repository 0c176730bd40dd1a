import type { AddressInfo } from 'node:net';
import { createLexicalIndexes } from '../routers/knowledge-base/lexical-index.ts';
import { createVectorIndexes, FLOATS_PER_MB } from '../routers/knowledge-base/vector-index.ts';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Config } from '../schema/config.ts';
import { createLogger, type Logger } from '../adapters/outbound/logger.ts';
import { createSecretBox, loadEncryptionKey } from '../adapters/outbound/secrets.ts';
import { loadTlsMaterial } from './tls.ts';
import { createDualListener } from './listener.ts';
import { createDispatcher } from './dispatch.ts';
import { createErrorReporter } from '../adapters/outbound/error-reporting.ts';
import { createMemoryRateLimiter } from '../adapters/outbound/rate-limit/memory.ts';
import { createRedisRateLimiter } from '../adapters/outbound/rate-limit/redis.ts';
import { withFallback } from '../adapters/outbound/rate-limit/fallback.ts';
import { openPGlite, openPostgres, type Database } from '../db/database.ts';
import { migrateToLatest } from '../db/migrate.ts';
import { appRouter } from '../routers/app-router.ts';
import type { AppDeps } from '../routers/context.ts';
import { createSessionManager } from '../routers/auth/sessions.ts';
import { createGuardedHttpClient } from '../adapters/outbound/http/guarded-client.ts';
import { createRestHandler } from '../adapters/inbound/rest/handler.ts';
import { LEGACY_ROUTES } from '../adapters/inbound/rest/legacy.ts';
import { buildOpenApiDocument } from '../adapters/inbound/rest/openapi.ts';
import { docsAsset, renderDocsPage } from '../adapters/inbound/rest/docs-page.ts';
import { graphiqlAsset } from '../adapters/inbound/graphql/graphiql.ts';
import { BROWSER_ASSETS_PATH, IMMUTABLE_CACHE_CONTROL } from '../adapters/inbound/browser-assets.ts';
import { createTrpcHandler } from '../adapters/inbound/trpc/handler.ts';
import { createGraphqlHandler } from '../adapters/inbound/graphql/handler.ts';
import { createWebHandler } from '../adapters/inbound/web/handler.ts';
import { buildWebAssets } from '../adapters/inbound/web/build.ts';
import { createDirectoryBlobStore } from '../adapters/outbound/blobs/blob-store.ts';
import { createJobQueue } from '../routers/jobs/queue.ts';
import { DOCUMENT_FAIR_KEY_PREFIX, documentJobsPerOwner, knowledgeBaseJobHandlers, requeueOrphanedDocuments } from '../routers/knowledge-base/jobs.ts';
import { webhookJobHandlers, webhookWorkersPerOwner } from '../routers/webhooks/delivery.ts';
import { maintainLikeAutovacuum } from '../db/pglite-maintenance.ts';
import { sweepOrphanedDeliveries } from '../routers/webhooks/sweeper.ts';
import { WEBHOOK_FAIR_KEY_PREFIX } from '../routers/webhooks/outbox-repository.ts';
import { createNotifiedCache } from '../db/notified-cache.ts';
import type { ActiveKey, ApiKey } from '../routers/api-keys/repository.ts';
import { createSessionCache } from '../routers/auth/session-cache.ts';
import { purgeStates } from '../routers/toolhub/repository.ts';
import { createDocumentPool } from '../adapters/outbound/workers/document-pool.ts';
import { createStripeClient } from '../adapters/outbound/billing/stripe-client.ts';
import { createDnsLookup } from '../adapters/outbound/dns/resolver.ts';
import { createDomainRouteCache } from '../routers/domains/routes.ts';
import { domainJobHandlers } from '../routers/domains/jobs.ts';
import { certificateJobHandlers } from '../routers/domains/certificates.ts';
import { bookingMailJobHandlers } from '../routers/bookings/mail.ts';
import { supportMailJobHandlers } from '../routers/support/mail.ts';
import { cancelTokenOf } from '../routers/bookings/booking-service.ts';
import { createMailer } from '../adapters/outbound/mail/mailer.ts';
import { createMetrics } from '../adapters/outbound/metrics/metrics.ts';
import { createCertificateStore } from '../routers/domains/certificate-store.ts';
import { installAcmeTransport } from '../adapters/outbound/acme/acme-client.ts';
import { API_KEY_CHANGES_CHANNEL } from '../db/migrations/0006_api_key_change_notify.ts';
import { API_KEY_LIST_CHANGES_CHANNEL } from '../db/migrations/0020_api_key_list_notify.ts';
import { SESSION_CHANGES_CHANNEL } from '../db/migrations/0017_session_change_notify.ts';
import { createSecurityEventRecorder, databaseSecurityEventStore } from '../routers/security-events/recorder.ts';

/** How long an instance trusts what it knows about a custom domain (changes made elsewhere show within this). */
const DOMAIN_ROUTE_TTL_MS = 5_000;

/** Validated API keys kept per instance (a few hundred bytes each). */
const API_KEY_CACHE_MAX_ENTRIES = 10_000;

/** Owners' key lists kept per instance, each of at most 100 keys (longer lists are read every time): 60 MB at worst. */
const API_KEY_LIST_CACHE_MAX_ENTRIES = 2_000;
const API_KEY_LIST_CACHE_MAX_KEYS = 100;

/** Validated owner sessions kept per instance (a few hundred bytes each; the least recently used go first). */
const SESSION_CACHE_MAX_ENTRIES = 10_000;

/** How often old security events (SECURITY_EVENTS_RETENTION_DAYS), expired sessions and tool-connection states are deleted. */
const RETENTION_SWEEP_MS = 3_600_000;
/** How often the embedded database is vacuumed and analysed where it needs it (autovacuum's own nap is a minute). */
const PGLITE_MAINTENANCE_EVERY_MS = 60_000;
/** A table's maintenance longer than this is logged at info (PGlite answers nothing meanwhile). */
const SLOW_MAINTENANCE_MS = 200;

export interface RunningApp {
  deps: AppDeps;
  port: number;
  /** https://127.0.0.1:<port> */
  url: string;
  /** Builds the hosted page's bundles now instead of on the first visitor's request. */
  warmUp(): Promise<void>;
  close(): Promise<void>;
}

export async function openDatabase(config: Config): Promise<Database> {
  return config.DATABASE_URL
    ? openPostgres(config.DATABASE_URL)
    : openPGlite({ dataDir: join(config.DATA_DIR, 'pglite'), sharedBuffersMb: config.PGLITE_SHARED_BUFFERS_MB });
}

/**
 * Builds every dependency once, runs migrations, and starts the one listener. `database` may be handed
 * in (tests pass a per-file clone); everything else comes from the configuration.
 */
export async function startApp(config: Config, options: { database?: Database; logger?: Logger } = {}): Promise<RunningApp> {
  const logger = options.logger ?? createLogger(config.LOG_LEVEL);
  const database = options.database ?? (await openDatabase(config));
  await migrateToLatest(database.db);
  const securityEvents = createSecurityEventRecorder({
    store: databaseSecurityEventStore(database.db),
    logger,
    retentionDays: config.SECURITY_EVENTS_RETENTION_DAYS,
  });
  const http = createGuardedHttpClient({
    allowHosts: config.OUTBOUND_ALLOW_HOSTS,
    extraCa: config.OUTBOUND_CA_FILE ? readFileSync(config.OUTBOUND_CA_FILE, 'utf8') : undefined,
    onBlocked: ({ host }) => securityEvents.record('outbound_blocked', { detail: { host } }),
  });
  const rateLimiter = config.REDIS_URL
    ? withFallback(createRedisRateLimiter({ url: config.REDIS_URL, keyPrefix: config.RATE_LIMIT_KEY_PREFIX }), createMemoryRateLimiter(), logger)
    : createMemoryRateLimiter();
  const secrets = createSecretBox(loadEncryptionKey(config.ENCRYPTION_KEY, config.DATA_DIR));
  const sessionCache = createSessionCache({ ttlMs: config.SESSION_CACHE_TTL_MS, maxEntries: SESSION_CACHE_MAX_ENTRIES });
  const deps: AppDeps = {
    config,
    database,
    logger,
    http,
    rateLimiter,
    secrets,
    sessions: createSessionManager(database.db, config.SESSION_TTL_DAYS, sessionCache),
    sessionCache,
    errorReporter: createErrorReporter({ logger, http, sentryDsn: config.SENTRY_DSN }),
    // Uploads are flushed to the disk as the database's commits are: PostgreSQL's are, the embedded database's are not.
    blobs: createDirectoryBlobStore(join(config.DATA_DIR, 'blobs'), { flushToDisk: database.kind === 'postgres' }),
    jobs: createJobQueue({ db: database.db, logger }),
    webhookJobs: createJobQueue({ db: database.db, logger }),
    mailJobs: createJobQueue({ db: database.db, logger }),
    vectorIndexes: createVectorIndexes({ maxFloats: config.VECTOR_INDEX_MAX_MB * FLOATS_PER_MB, logger }),
    lexicalIndexes: createLexicalIndexes({ maxPostings: config.LEXICAL_INDEX_MAX_POSTINGS, logger }),
    apiKeyCache: createNotifiedCache<ActiveKey>({ ttlMs: config.API_KEY_CACHE_TTL_MS, maxEntries: API_KEY_CACHE_MAX_ENTRIES }),
    apiKeyListCache: createNotifiedCache<readonly ApiKey[]>({
      ttlMs: config.API_KEY_CACHE_TTL_MS,
      maxEntries: API_KEY_LIST_CACHE_MAX_ENTRIES,
      storable: (list) => list.length <= API_KEY_LIST_CACHE_MAX_KEYS,
    }),
    documentPool: createDocumentPool({ size: config.PARSER_WORKERS, deadlineMs: config.PARSER_DEADLINE_MS, memoryMb: config.PARSER_MEMORY_MB }),
    stripe: config.STRIPE_SECRET_KEY
      ? createStripeClient({ secretKey: config.STRIPE_SECRET_KEY, apiUrl: config.STRIPE_API_URL, http, timeoutMs: config.OUTBOUND_TIMEOUT_MS })
      : undefined,
    dns: createDnsLookup({ servers: config.DNS_SERVERS, timeoutMs: config.DNS_TIMEOUT_MS }),
    domainRoutes: createDomainRouteCache({ ttlMs: DOMAIN_ROUTE_TTL_MS, maxEntries: 10_000 }),
    domainCertificates: createCertificateStore({ db: database.db, secrets, ttlMs: 60_000, maxEntries: 10_000 }),
    mailer: createMailer({ smtpUrl: config.SMTP_URL, from: config.MAIL_FROM, logger, sendTimeoutMs: config.SMTP_SEND_TIMEOUT_MS }),
    metrics: createMetrics(),
    securityEvents,
  };
  deps.metrics.setCollector(async () => {
    const stats = await deps.jobs.stats();
    return { jobs: { queued: stats.queued, running: stats.running, dead: stats.dead } };
  });
  if (config.TLS_MODE === 'acme') installAcmeTransport(http, config.OUTBOUND_TIMEOUT_MS);
  // Each cache is served only while its change notifications are known to arrive (see db/notified-cache.ts).
  const keepInStep = (channel: string, changes: string, name: string, cache: { setLive(live: boolean): void }, onNotify: (payload: string) => void) =>
    database.listen(channel, {
      onNotify,
      onListening: () => cache.setLive(true),
      onLost: () => {
        cache.setLive(false);
        logger.warn(`lost the database connection that listens for ${changes} changes; the ${name} cache is off until it is back`);
      },
    });
  const keys = deps.apiKeyCache;
  const stopListening = await keepInStep(API_KEY_CHANGES_CHANNEL, 'API-key', 'key', keys, () => keys.invalidate());
  const keyLists = deps.apiKeyListCache;
  const stopListeningForKeyLists = await keepInStep(API_KEY_LIST_CHANGES_CHANNEL, 'API-key list', 'key list', keyLists, (ownerId) =>
    ownerId ? keyLists.forget(ownerId) : keyLists.invalidate(),
  );
  const stopListeningForSessions = await keepInStep(SESSION_CHANGES_CHANNEL, 'session', 'session', sessionCache, (ownerId) =>
    ownerId ? sessionCache.forgetOwner(ownerId) : sessionCache.invalidate(),
  );
  const sweepers: Array<ReturnType<typeof setInterval>> = [];
  securityEvents.start();
  // Not awaited: a large backlog must not delay start-up (close waits for a running prune).
  const pruneSecurityEvents = () => {
    securityEvents.prune().catch((error: unknown) => logger.warn('security event retention sweep failed', { reason: String(error) }));
  };
  // lucia deletes an expired session only when its token is shown again, and an abandoned tool connection leaves
  // its OAuth state (a sealed PKCE verifier) behind: both are swept with the security events.
  let sweepingExpired: Promise<void> | undefined;
  const sweepExpired = () => {
    sweepingExpired ??= Promise.all([deps.sessions.deleteExpiredSessions(), purgeStates(database.db)])
      .then(() => undefined)
      .catch((error: unknown) => logger.warn('expired sessions and tool-connection states sweep failed', { reason: String(error) }))
      .finally(() => (sweepingExpired = undefined));
  };
  const sweepRetention = () => {
    pruneSecurityEvents();
    sweepExpired();
  };
  sweepRetention();
  const pruner = setInterval(sweepRetention, RETENTION_SWEEP_MS);
  pruner.unref();
  sweepers.push(pruner);
  // The embedded database runs no autovacuum (db/pglite-maintenance.ts): the service does its work, a pass a minute.
  let maintaining: Promise<void> | undefined;
  if (database.kind === 'pglite') {
    const maintain = () => {
      maintaining ??= maintainLikeAutovacuum(database.db)
        .then((done) => {
          if (done.length === 0) return;
          const tables = done.map((t) => `${t.table} (${t.action}, ${t.ms} ms)`).join(', ');
          // A long one held every request for its duration: worth an operator's eye.
          if (done.some((t) => t.ms >= SLOW_MAINTENANCE_MS)) logger.info('embedded database maintained; the database was busy for a while', { tables });
          else logger.debug('embedded database maintained', { tables });
        })
        .catch((error: unknown) => logger.warn('embedded database maintenance failed', { reason: String(error) }))
        .finally(() => (maintaining = undefined));
    };
    const maintainer = setInterval(maintain, PGLITE_MAINTENANCE_EVERY_MS);
    maintainer.unref();
    sweepers.push(maintainer);
  }
  if (config.JOB_CONCURRENCY > 0) {
    deps.jobs.start(
      {
        ...knowledgeBaseJobHandlers(deps),
        ...domainJobHandlers(deps),
        ...certificateJobHandlers(deps),
      },
      {
        concurrency: config.JOB_CONCURRENCY,
        leaseMs: config.JOB_LEASE_MS,
        onlyHandledKinds: true,
        perKeyLimit: documentJobsPerOwner(config.JOB_CONCURRENCY),
        fairKeyPrefix: DOCUMENT_FAIR_KEY_PREFIX,
      },
    );
    await requeueOrphanedDocuments(deps);
    // Also while running: a job can die (its last lease ran out) long after start-up.
    const sweeper = setInterval(
      () => {
        requeueOrphanedDocuments(deps).catch((error: unknown) => logger.warn('document sweep failed', { reason: String(error) }));
      },
      Math.max(config.JOB_LEASE_MS, 30_000),
    );
    sweeper.unref();
    sweepers.push(sweeper);
  }

  if (config.WEBHOOK_CONCURRENCY > 0) {
    const handlers = webhookJobHandlers({
      db: database.db,
      http,
      secrets: deps.secrets,
      logger,
      jobs: deps.webhookJobs,
      timeoutMs: config.WEBHOOK_TIMEOUT_MS,
      now: () => new Date(),
      onOutcome: (succeeded) => deps.metrics.countWebhookOutcome(succeeded ? 'delivered' : 'failed'),
    });
    deps.webhookJobs.start(handlers, {
      concurrency: config.WEBHOOK_CONCURRENCY,
      leaseMs: config.JOB_LEASE_MS,
      onlyHandledKinds: true,
      perKeyLimit: webhookWorkersPerOwner(config.WEBHOOK_CONCURRENCY, config.WEBHOOK_CONCURRENCY_PER_OWNER),
      fairKeyPrefix: WEBHOOK_FAIR_KEY_PREFIX,
    });
    const sweep = () =>
      sweepOrphanedDeliveries(database.db, deps.webhookJobs).catch((error: unknown) => logger.warn('webhook delivery sweep failed', { reason: String(error) }));
    await sweep();
    const sweeper = setInterval(sweep, Math.max(config.JOB_LEASE_MS, 30_000));
    sweeper.unref();
    sweepers.push(sweeper);
  }

  if (config.MAIL_CONCURRENCY > 0) {
    // Workers of their own: a mail server that stalls (or trickles bytes) holds only these, never documents.
    deps.mailJobs.start(
      { ...bookingMailJobHandlers(deps, (id) => cancelTokenOf(deps, id)), ...supportMailJobHandlers(deps) },
      { concurrency: config.MAIL_CONCURRENCY, leaseMs: config.JOB_LEASE_MS, onlyHandledKinds: true },
    );
  }

  let openapi: ReturnType<typeof buildOpenApiDocument> | undefined;
  const openApiDocument = () =>
    (openapi ??= buildOpenApiDocument(appRouter, {
      title: 'Chat Interface and Knowledge Base Service API',
      version: '1.0.0',
      description: 'The v1 REST surface. Every operation is also reachable as a tRPC procedure (/trpc) and, for dashboards, through GraphQL (/graphql).',
    }));
  let docsPage: ReturnType<typeof renderDocsPage> | undefined;
  const rest = createRestHandler({
    router: appRouter,
    legacyRoutes: LEGACY_ROUTES,
    jsonBodyLimitBytes: config.JSON_BODY_LIMIT_BYTES,
    documents: {
      '/api/v1/openapi.json': () => ({ contentType: 'application/json; charset=utf-8', body: JSON.stringify(openApiDocument()) }),
      '/api/v1/docs': () => (docsPage ??= renderDocsPage(openApiDocument())),
      [BROWSER_ASSETS_PATH]: async (name) => {
        const asset = docsAsset(name) ?? (await graphiqlAsset(name));
        return asset && { contentType: asset.contentType, body: asset.body, gzip: asset.gzip, etag: asset.etag, cacheControl: IMMUTABLE_CACHE_CONTROL };
      },
    },
  });
  const web = createWebHandler(deps, buildWebAssets);
  const dispatch = createDispatcher(deps, {
    web,
    rest,
    trpc: createTrpcHandler(appRouter, config.JSON_BODY_LIMIT_BYTES),
    graphql: createGraphqlHandler(appRouter, config.JSON_BODY_LIMIT_BYTES),
  });
  const tls = await loadTlsMaterial({ certPath: config.TLS_CERT, keyPath: config.TLS_KEY, dataDir: config.DATA_DIR });
  const listener = createDualListener(tls, dispatch, (servername) => deps.domainCertificates.contextFor(servername));
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
    warmUp: web.warmUp,
    close: () =>
      (closing ??= (async () => {
        const closed = new Promise<void>((resolve) => listener.server.close(() => resolve()));
        listener.closeConnections();
        await closed;
        for (const sweeper of sweepers) clearInterval(sweeper);
        // Within main.ts's 10 s shutdown bound: handlers still running after 8 s are released, not left leased.
        await Promise.all([deps.jobs.stop(8_000), deps.webhookJobs.stop(8_000), deps.mailJobs.stop(8_000)]);
        // In-memory index builds read the database page by page: they stop at the next page.
        await Promise.all([deps.lexicalIndexes.close(), deps.vectorIndexes.close()]);
        // After the workers (a delivery may still record a refused address), before the database closes.
        await securityEvents.close();
        await deps.documentPool.close();
        await deps.mailer.close();
        await rateLimiter.close();
        await stopListening();
        await stopListeningForKeyLists();
        await stopListeningForSessions();
        await maintaining;
        await sweepingExpired;
        await database.close();
      })()),
  };
}
