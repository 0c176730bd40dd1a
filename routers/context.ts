import type { Lucia } from 'lucia';
import type { Config } from '../schema/config.ts';
import type { SecretBox } from '../adapters/outbound/secrets.ts';
import type { RateLimiter } from '../adapters/outbound/rate-limit/rate-limiter.ts';
import type { Database } from '../db/database.ts';
import type { Logger } from '../adapters/outbound/logger.ts';
import type { ErrorReporter } from '../adapters/outbound/error-reporting.ts';
import type { GuardedHttpClient } from '../adapters/outbound/http/guarded-client.ts';
import type { Caller } from './auth/principal.ts';
import type { BlobStore } from '../adapters/outbound/blobs/blob-store.ts';
import type { JobQueue } from './jobs/queue.ts';
import type { LexicalIndexes } from './knowledge-base/lexical-index.ts';
import type { VectorIndexes } from './knowledge-base/vector-index.ts';
import type { NotifiedCache } from '../db/notified-cache.ts';
import type { ActiveKey, ApiKey } from './api-keys/repository.ts';
import type { SessionCache } from './auth/session-cache.ts';
import type { DocumentPool } from '../adapters/outbound/workers/document-pool.ts';
import type { Stripe } from '../adapters/outbound/billing/stripe-client.ts';
import type { DnsLookup } from '../adapters/outbound/dns/resolver.ts';
import type { DomainRouteCache } from './domains/routes.ts';
import type { CertificateStore } from './domains/certificate-store.ts';
import type { Mailer } from '../adapters/outbound/mail/mailer.ts';
import type { ServiceMetrics } from '../adapters/outbound/metrics/metrics.ts';
import type { SecurityEventRecorder } from './security-events/recorder.ts';

/** Everything the procedures may use. Built once per process in server/app.ts; never a container. */
export interface AppDeps {
  config: Config;
  database: Database;
  secrets: SecretBox;
  sessions: Lucia;
  rateLimiter: RateLimiter;
  logger: Logger;
  errorReporter: ErrorReporter;
  http: GuardedHttpClient;
  blobs: BlobStore;
  jobs: JobQueue;
  /** The same jobs table, claimed by the webhook delivery workers (their own concurrency). */
  webhookJobs: JobQueue;
  /** The same jobs table, claimed by the mail workers (their own concurrency, so a stalling SMTP server never holds up documents). */
  mailJobs: JobQueue;
  /** In-memory BM25 indexes of knowledge bases, per instance, each for one content version. */
  lexicalIndexes: LexicalIndexes;
  /** In-memory vector matrices of knowledge bases, per instance, each for one embedding and content version. */
  vectorIndexes: VectorIndexes;
  /** Validated API keys by the SHA-256 of the key, per instance; key and interface changes empty it (db/notified-cache.ts). */
  apiKeyCache: NotifiedCache<ActiveKey>;
  /** Each owner's key list as GET /api-keys shows it, per instance; any change to one of the owner's keys drops it. */
  apiKeyListCache: NotifiedCache<readonly ApiKey[]>;
  /** Validated owner sessions, per instance; owner and session changes empty it (see routers/auth/session-cache.ts). */
  sessionCache: SessionCache;
  /** Worker threads for document parsing and local embedding (CPU work kept off the request thread). */
  documentPool: DocumentPool;
  /** The Stripe SDK when billing is configured (STRIPE_SECRET_KEY); undefined turns payments off. */
  stripe?: Stripe;
  /** DNS lookups for domain checks, through DNS_SERVERS. */
  dns: DnsLookup;
  /** Active custom domains, per instance, for the listener and route-public. */
  domainRoutes: DomainRouteCache;
  /** Custom domains' certificates for the listener's SNI callback. */
  domainCertificates: CertificateStore;
  /** Outbound mail (SMTP_URL; logged when unset). */
  mailer: Mailer;
  /** Prometheus metrics of this instance (GET /metrics). */
  metrics: ServiceMetrics;
  /** Security events (failed sign-ins, bad keys, refused addresses, 429s...), buffered and written every second. */
  securityEvents: SecurityEventRecorder;
}

/** Per-request context, identical for REST, tRPC and GraphQL. */
export interface Context {
  deps: AppDeps;
  requestId: string;
  clientIp: string;
  /** The request's `Origin` header (browsers send it on cross-origin and POST requests) and its `Host`. */
  origin?: string;
  host?: string;
  /** Raw `Authorization` header; resolved lazily by getCaller so public routes never touch the database. */
  authorization: string | undefined;
  /** Headers the procedures want on the response (rate-limit headers); every adapter copies them. */
  responseHeaders: Record<string, string>;
  getCaller(): Promise<Caller>;
  /** A procedure may choose a different success status (e.g. 200 for an upload that was a duplicate).
   *  An object, like responseHeaders, because middlewares hand procedures a copy of the context. */
  response: { status?: 200 | 201 };
  /** The procedure path the REST adapter already counted (uploads are limited before their body is read). */
  rateLimitPrecounted?: string;
  /** The operation's path template once an adapter matched one (a metrics label: never ids or values). */
  routeTemplate?: string;
  /** The client asked for Server-Sent Events (`Accept: text/event-stream`). */
  acceptsEventStream: boolean;
  signal?: AbortSignal;
}
