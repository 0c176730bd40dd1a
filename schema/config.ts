import { availableParallelism } from 'node:os';
import { z } from 'zod';

const bool = z
  .enum(['0', '1', 'true', 'false', ''])
  .default('')
  .transform((v) => v === '1' || v === 'true');
const list = z
  .string()
  .default('')
  .transform((v) =>
    v
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean),
  );
const positiveInt = (fallback: number) => z.coerce.number().int().positive().default(fallback);

/** The whole configuration: one zod schema over the environment. A bad value stops start-up naming the variable. */
export const configSchema = z.object({
  PORT: z.coerce.number().int().min(0).max(65535).default(8443),
  HOST: z.string().default('0.0.0.0'),
  DATA_DIR: z.string().default('./data'),
  DATABASE_URL: z
    .string()
    .url()
    .refine((u) => /^postgres(ql)?:\/\//.test(u), 'must be a postgres:// URL')
    .optional(),
  REDIS_URL: z
    .string()
    .url()
    .refine((u) => /^rediss?:\/\//.test(u), 'must be a redis:// URL')
    .optional(),
  TLS_CERT: z.string().optional(),
  TLS_KEY: z.string().optional(),
  TRUST_PROXY: bool,
  /** 32 bytes, base64: encrypts stored secrets. Generated into DATA_DIR on first start when absent. */
  ENCRYPTION_KEY: z
    .string()
    .refine((v) => Buffer.from(v, 'base64').length === 32, 'must be 32 bytes encoded as base64')
    .optional(),
  ADMIN_EMAILS: list.transform((emails) => emails.map((e) => e.toLowerCase())),
  CRON_SECRET: z.string().min(16, 'must be at least 16 characters').optional(),
  SESSION_TTL_DAYS: positiveInt(30),
  OIDC_ISSUER: z.string().url().optional(),
  OIDC_AUDIENCE: z.string().optional(),
  OIDC_JWKS_URL: z.string().url().optional(),
  SENTRY_DSN: z.string().url().optional(),
  OUTBOUND_ALLOW_HOSTS: list,
  /** Deadline of a call to an owner's external AI endpoint (the spec's 30 s). */
  OUTBOUND_TIMEOUT_MS: positiveInt(30_000),
  RATE_LIMIT_CHAT: positiveInt(60),
  RATE_LIMIT_KB_QUERY: positiveInt(60),
  RATE_LIMIT_UPLOAD: positiveInt(10),
  RATE_LIMIT_DEFAULT: positiveInt(100),
  /** Contact-form submissions per client IP and window, and by everyone together (the burst budget). */
  RATE_LIMIT_SUPPORT: positiveInt(5),
  RATE_LIMIT_SUPPORT_GLOBAL: positiveInt(120),
  /** Visitor tokens minted per client IP and window (the hosted page asks once per visit). */
  RATE_LIMIT_VISITOR_SESSIONS: positiveInt(20),
  /** All visitor calls from one client IP per window, whichever visitors they come as. */
  RATE_LIMIT_VISITOR_IP: positiveInt(300),
  /** Lifetime of a visitor token; the page renews it with its resume token. */
  VISITOR_TOKEN_TTL_SECONDS: positiveInt(3600),
  /** A resume token unused for this many days no longer resumes its visitor (at most 100 years: an interval, not a count). */
  VISITOR_RESUME_IDLE_DAYS: z.coerce.number().int().positive().max(36_500).default(90),
  RATE_LIMIT_WINDOW_SECONDS: positiveInt(60),
  /** Redis key prefix for rate-limit counters; instances that must share counts use the same one. */
  RATE_LIMIT_KEY_PREFIX: z.string().max(64).default('rl:'),
  /** The embedded database's buffer pool (MB); the operating system's file cache holds the rest of its pages. */
  PGLITE_SHARED_BUFFERS_MB: z.coerce.number().int().min(1).max(4096).default(32),
  JSON_BODY_LIMIT_BYTES: positiveInt(1024 * 1024),
  QUERY_CACHE_LIMIT_BYTES: positiveInt(256 * 1024),
  /** Request bodies held in memory at once by the whole instance (JSON, uploads, GraphQL); past it a new body is a 503. */
  BODY_MEMORY_LIMIT_BYTES: positiveInt(256 * 1024 * 1024),
  /** The same for one client (its rate-limit key: IP, IPv6 per /64); past it a new body is a 429. A client's only body always fits. */
  BODY_MEMORY_PER_CLIENT_BYTES: positiveInt(32 * 1024 * 1024),
  /** A body that has started may go this long without a byte before it is answered 408 and its connection closed. */
  BODY_IDLE_TIMEOUT_MS: z.coerce.number().int().min(100).max(900_000).default(30_000),
  /** Postings held in memory for BM25 across all knowledge bases of an instance (least recently used go first); 0 scores in SQL. */
  LEXICAL_INDEX_MAX_POSTINGS: z.coerce.number().int().min(0).max(100_000_000).default(4_000_000),
  /** Memory for vectors held for similarity search across all knowledge bases of an instance (MB); 0 holds none (every query scans the stored vectors). */
  VECTOR_INDEX_MAX_MB: z.coerce.number().int().min(0).max(65_536).default(256),
  /**
   * Background workers (document processing, re-embedding) per instance; 0 runs none (API-only instance). They
   * mostly wait, on the database and on the parsing pool (PARSER_WORKERS bounds the CPU they use), so 4 on two
   * cores keep both busy where 2 left them waiting in turn.
   */
  JOB_CONCURRENCY: z.coerce.number().int().min(0).max(32).default(4),
  /** Concurrent webhook deliveries per instance (their own workers, so a slow receiver never holds up documents); 0 runs none. */
  WEBHOOK_CONCURRENCY: z.coerce.number().int().min(0).max(64).default(8),
  /**
   * Of those, how many may deliver to one owner's endpoints at once (default: all but a quarter, at least one kept
   * back: 6 of 8), so an owner whose endpoint answers only at the deadline never holds every worker; the owners with
   * the fewest in flight go first.
   */
  WEBHOOK_CONCURRENCY_PER_OWNER: z.coerce.number().int().min(1).max(64).optional(),
  /** Deadline of one webhook delivery attempt. */
  WEBHOOK_TIMEOUT_MS: positiveInt(15_000),
  /** Concurrent mail sends per instance (their own workers, so a slow SMTP server never holds up documents); 0 runs none. */
  MAIL_CONCURRENCY: z.coerce.number().int().min(0).max(64).default(2),
  /** How long a claimed job stays leased without a heartbeat; after a crash, the jobs the dead process was running are picked up again once it runs out. */
  JOB_LEASE_MS: z.coerce.number().int().min(1_000).max(3_600_000).default(60_000),
  /** How long a validated API key, and an owner's key list, are reused without a lookup (0: never). Changes to keys and interfaces reach the caches at once, on every instance. */
  API_KEY_CACHE_TTL_MS: z.coerce.number().int().min(0).max(600_000).default(30_000),
  /** How long a validated owner session is reused without a lookup (0: never). Sign-out, revocation and owner changes drop it at once, on every instance. */
  SESSION_CACHE_TTL_MS: z.coerce.number().int().min(0).max(600_000).default(30_000),
  /** Worker threads that parse documents and run the local embedder (CPU work kept off the request thread). One core
   *  is left to the request thread: with every core parsing, health p99 under hostile documents passed 50 ms. */
  PARSER_WORKERS: z.coerce
    .number()
    .int()
    .min(1)
    .max(16)
    .default(Math.min(4, Math.max(1, availableParallelism() - 1))),
  /** How long one document's parsing (or one batch of its embedding) may run in a worker before it is stopped. */
  PARSER_DEADLINE_MS: z.coerce.number().int().min(100).max(3_600_000).default(60_000),
  /** Heap limit of each parsing worker (V8 old generation); a document needing more fails, the service stays up. */
  PARSER_MEMORY_MB: z.coerce.number().int().min(32).max(16_384).default(512),
  /** Optional external document-parsing service, checked by POST /knowledge-base/test-parser. */
  PARSER_SERVICE_URL: z.string().url().optional(),
  PARSER_SERVICE_KEY: z.string().optional(),
  LOG_LEVEL: z.enum(['debug', 'info', 'warn', 'error', 'silent']).default('info'),
  /** Billing is on when this is set (Stripe's secret key). */
  STRIPE_SECRET_KEY: z.string().min(8).optional(),
  /** The signing secret of the Stripe webhook endpoint that points at POST /api/v1/payments/webhook. */
  STRIPE_WEBHOOK_SECRET: z.string().min(8).optional(),
  /** Price ids per plan and interval: `premium:month=price_…,premium:year=price_…,enterprise:month=price_…`. */
  STRIPE_PRICES: list.pipe(
    z
      .array(z.string().regex(/^(premium|enterprise):(month|year)=\S+$/, 'entries look like premium:month=price_123'))
      .transform(
        (entries) =>
          Object.fromEntries(entries.map((e) => e.split('=') as [string, string])) as Partial<
            Record<`${'premium' | 'enterprise'}:${'month' | 'year'}`, string>
          >,
      ),
  ),
  /** Where the Stripe API is (a Stripe-compatible server such as stripe-mock); Stripe's own when unset. */
  STRIPE_API_URL: z.string().url().optional(),
  /** Length of the free trial an owner may start once. */
  TRIAL_DAYS: z.coerce.number().int().min(1).max(365).default(14),
  /** Origins the service and its dashboard are served at: checkout and portal return URLs must be on one of them. */
  PUBLIC_ORIGINS: list.pipe(
    z.array(
      z
        .string()
        .url()
        .transform((u) => new URL(u).origin),
    ),
  ),
  /** DNS servers for domain checks (`host` or `host:port`); the system's resolvers when empty. */
  DNS_SERVERS: list,
  DNS_TIMEOUT_MS: z.coerce.number().int().min(100).max(30_000).default(3_000),
  /** The hostname owners point their domains at with a CNAME (the service's public hostname). */
  DOMAIN_CNAME_TARGET: z.string().max(253).optional(),
  /** Addresses owners may point an apex at with A/AAAA records instead. */
  DOMAIN_ADDRESSES: list.pipe(z.array(z.union([z.ipv4(), z.ipv6()]))),
  /** Hostnames no owner may claim (the hosts of PUBLIC_ORIGINS and DOMAIN_CNAME_TARGET are reserved too). */
  RESERVED_HOSTNAMES: list,
  /**
   * Certificates of custom domains. acme: this service obtains them over ACME and serves them by SNI; proxy: a
   * proxy in front terminates TLS (it asks GET /api/v1/domains/route-public before obtaining one), and ssl-status
   * reads what it serves; off: neither. Default: acme when ACME_DIRECTORY_URL is set, otherwise off.
   */
  TLS_MODE: z.enum(['acme', 'proxy', 'off']).optional(),
  /** In proxy mode, the port where the proxy serves HTTPS for custom domains. */
  TLS_PROXY_PORT: z.coerce.number().int().min(1).max(65535).default(443),
  /** Provider URL overrides for tool integrations: `slack.authorize=URL,slack.token=URL,slack.api=URL` (a local provider in tests). */
  TOOLHUB_PROVIDER_URLS: list,
  /** The platform's own OAuth clients per toolkit, offered to every owner: `slack=<client id>:<client secret>,...`. */
  TOOLHUB_PLATFORM_CLIENTS: list,
  /** How long security events and their hourly counts are kept (GET /api/v1/admin/security-monitoring). */
  SECURITY_EVENTS_RETENTION_DAYS: z.coerce.number().int().min(1).max(3650).default(30),
  /** Up to this many visitor-days in a dashboard's range, distinct visitors are counted exactly; beyond, estimated (HyperLogLog). */
  DASHBOARD_EXACT_VISITOR_DAYS: z.coerce.number().int().min(0).max(10_000_000).default(20_000),
  /** Bearer token for GET /metrics (Prometheus); unset: /metrics answers 404. */
  METRICS_TOKEN: z.string().min(16).max(200).optional(),
  /** smtp:// or smtps:// with credentials: booking and support mail. Unset: mail is logged (recipients, subject), not sent. */
  SMTP_URL: z
    .string()
    .url()
    .refine((u) => /^smtps?:\/\//.test(u), 'must be an smtp:// or smtps:// URL')
    .optional(),
  MAIL_FROM: z.string().max(254).default('Chat interfaces <no-reply@localhost>'),
  /** Deadline of one whole SMTP send: nodemailer's socket timeout is an idle timer that a server trickling bytes keeps resetting. */
  SMTP_SEND_TIMEOUT_MS: z.coerce.number().int().min(100).max(3_600_000).default(60_000),
  /** Minutes before a booking's start when its attendee gets a reminder (0: none). */
  BOOKING_REMINDER_MINUTES: z.coerce
    .number()
    .int()
    .min(0)
    .max(60 * 24 * 14)
    .default(24 * 60),
  /** Upcoming bookings one visitor may hold on an interface (the chat's booking form is anonymous). */
  BOOKINGS_PER_VISITOR: positiveInt(3),
  /** Bookings visitors may make on one interface per hour, all visitors together (each mails an unverified address). */
  BOOKINGS_PER_INTERFACE_HOUR: positiveInt(20),
  /** An ACME directory (Let's Encrypt's when TLS_MODE=acme and this is unset): certificates for active domains. */
  ACME_DIRECTORY_URL: z.string().url().optional(),
  ACME_EMAIL: z.string().email().optional(),
  /** CAA issuer domains that name our CA: a domain whose CAA records allow none of them is not attempted. */
  ACME_CAA_IDENTITIES: list,
  /** A PEM file of extra certificates trusted for outbound HTTPS (a private ACME CA). */
  OUTBOUND_CA_FILE: z.string().optional(),
});

/** Cross-variable rules. An issuer without an audience would accept ID tokens minted for any other app. */
const configRules = configSchema.superRefine((c, ctx) => {
  if (c.OIDC_ISSUER && URL.canParse(c.OIDC_ISSUER) && !c.OIDC_AUDIENCE)
    ctx.addIssue({ code: 'custom', path: ['OIDC_AUDIENCE'], message: 'is required when OIDC_ISSUER is set (your client id at the provider)' });
});

export const LETS_ENCRYPT_DIRECTORY = 'https://acme-v02.api.letsencrypt.org/directory';

/** Settings derived from others: the TLS mode of custom domains and, in acme mode, the directory. */
const resolvedConfig = configRules.transform((c) => {
  const tlsMode = c.TLS_MODE ?? (c.ACME_DIRECTORY_URL ? 'acme' : 'off');
  return {
    ...c,
    TLS_MODE: tlsMode,
    ACME_DIRECTORY_URL: tlsMode === 'acme' ? (c.ACME_DIRECTORY_URL ?? LETS_ENCRYPT_DIRECTORY) : undefined,
  };
});

export type Config = z.output<typeof resolvedConfig>;

export class ConfigError extends Error {
  override readonly name = 'ConfigError';
}

export function loadConfig(env: Record<string, string | undefined> = process.env): Config {
  const picked: Record<string, string> = {};
  for (const key of Object.keys(configSchema.shape)) {
    const value = env[key]?.trim();
    if (value !== undefined && value !== '') picked[key] = value;
  }
  const parsed = resolvedConfig.safeParse(picked);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `  ${i.path.join('.')}: ${i.message}`);
    throw new ConfigError(`invalid configuration:\n${lines.join('\n')}`);
  }
  return parsed.data;
}
