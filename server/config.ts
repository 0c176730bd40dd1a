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
  DATABASE_URL: z.string().url().refine((u) => /^postgres(ql)?:\/\//.test(u), 'must be a postgres:// URL').optional(),
  REDIS_URL: z.string().url().refine((u) => /^rediss?:\/\//.test(u), 'must be a redis:// URL').optional(),
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
  RATE_LIMIT_WINDOW_SECONDS: positiveInt(60),
  /** Redis key prefix for rate-limit counters; instances that must share counts use the same one. */
  RATE_LIMIT_KEY_PREFIX: z.string().max(64).default('rl:'),
  JSON_BODY_LIMIT_BYTES: positiveInt(1024 * 1024),
  QUERY_CACHE_LIMIT_BYTES: positiveInt(256 * 1024),
  /** 'auto' uses pgvector when the database has it; 'exact' always scores stored vectors in the service. */
  VECTOR_SEARCH: z.enum(['auto', 'exact']).default('auto'),
  /** Background workers (document processing, re-embedding) per instance; 0 runs none (API-only instance). */
  JOB_CONCURRENCY: z.coerce.number().int().min(0).max(32).default(2),
  /** Concurrent webhook deliveries per instance (their own workers, so a slow receiver never holds up documents); 0 runs none. */
  WEBHOOK_CONCURRENCY: z.coerce.number().int().min(0).max(64).default(8),
  /** Deadline of one webhook delivery attempt. */
  WEBHOOK_TIMEOUT_MS: positiveInt(15_000),
  /** How long a claimed job stays leased without a heartbeat; after a crash, the jobs the dead process was running are picked up again once it runs out. */
  JOB_LEASE_MS: z.coerce.number().int().min(1_000).max(3_600_000).default(60_000),
  /** How long a validated API key is reused without a lookup (0: never). Changes to keys and interfaces empty the cache at once, on every instance. */
  API_KEY_CACHE_TTL_MS: z.coerce.number().int().min(0).max(600_000).default(30_000),
  /** Optional external document-parsing service, checked by POST /knowledge-base/test-parser. */
  PARSER_SERVICE_URL: z.string().url().optional(),
  PARSER_SERVICE_KEY: z.string().optional(),
  LOG_LEVEL: z.enum(['debug', 'info', 'warn', 'error', 'silent']).default('info'),
});

/** Cross-variable rules. An issuer without an audience would accept ID tokens minted for any other app. */
const configRules = configSchema.superRefine((c, ctx) => {
  if (c.OIDC_ISSUER && URL.canParse(c.OIDC_ISSUER) && !c.OIDC_AUDIENCE) ctx.addIssue({ code: 'custom', path: ['OIDC_AUDIENCE'], message: 'is required when OIDC_ISSUER is set (your client id at the provider)' });
});

export type Config = z.infer<typeof configSchema>;

export class ConfigError extends Error {
  override readonly name = 'ConfigError';
}

export function loadConfig(env: Record<string, string | undefined> = process.env): Config {
  const picked: Record<string, string> = {};
  for (const key of Object.keys(configSchema.shape)) {
    const value = env[key]?.trim();
    if (value !== undefined && value !== '') picked[key] = value;
  }
  const parsed = configRules.safeParse(picked);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `  ${i.path.join('.')}: ${i.message}`);
    throw new ConfigError(`invalid configuration:\n${lines.join('\n')}`);
  }
  return parsed.data;
}
