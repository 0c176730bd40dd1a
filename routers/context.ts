import type { Lucia } from 'lucia';
import type { Config } from '../server/config.ts';
import type { SecretBox } from '../server/secrets.ts';
import type { RateLimiter } from '../server/rate-limit/rate-limiter.ts';
import type { Database } from '../db/database.ts';
import type { Logger } from '../server/logger.ts';
import type { ErrorReporter } from '../server/error-reporting.ts';
import type { GuardedHttpClient } from '../adapters/http/guarded-client.ts';
import type { Caller } from './auth/caller.ts';
import type { BlobStore } from '../adapters/blobs/blob-store.ts';
import type { JobQueue } from '../server/jobs/queue.ts';
import type { VectorSearchMode } from './knowledge-base/vectors.ts';
import type { ApiKeyCache } from './api-keys/key-cache.ts';

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
  vectorSearch: VectorSearchMode;
  apiKeyCache: ApiKeyCache;
}

/** Per-request context, identical for REST, tRPC and GraphQL. */
export interface Context {
  deps: AppDeps;
  requestId: string;
  clientIp: string;
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
  /** The client asked for Server-Sent Events (`Accept: text/event-stream`). */
  acceptsEventStream: boolean;
  signal?: AbortSignal;
}
