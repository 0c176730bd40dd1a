import { initTRPC, TRPCError } from '@trpc/server';
import type { OpenApiMeta } from 'trpc-to-openapi';
import { AppError } from '../schema/errors.ts';
import type { Context } from './context.ts';
import { unauthorized, type OwnerPrincipal } from './auth/caller.ts';
import { createHash, timingSafeEqual } from 'node:crypto';
import { clientKey } from '../server/rate-limit/client-key.ts';

export type AuthRule = 'public' | 'session' | 'apiKey' | 'sessionOrApiKey' | 'enterprise' | 'admin' | 'cron';
export type RateLimitBucket = 'chat' | 'kbQuery' | 'upload' | 'default';

/** What a procedure declares about itself; adapters read it, nothing else decides these things. */
export type AppMeta = OpenApiMeta<{
  auth?: AuthRule;
  rateLimit?: RateLimitBucket;
  /** HTTP status of success on REST (201 for creates). */
  successStatus?: 200 | 201 | 202;
  /** Flat REST shape (`success` beside the fields, no `data`), as the spec shows for a few operations. */
  flat?: boolean;
  /** REST body is multipart/form-data: the adapter parses it into the input (`file` + text fields), capped
   *  at maxBytes, or at the caller's plan limit with 'plan'. */
  multipart?: { fileField: string; maxBytes: number | 'plan' };
  /** REST answer may be Server-Sent Events: when the output is an async iterable of JSON events, it is streamed. */
  sse?: boolean;
  /** REST answer is raw bytes: the output is `{ contentType, body: Uint8Array, cacheControl? }`. */
  rawResponse?: boolean;
}>;

const t = initTRPC
  .context<Context>()
  .meta<AppMeta>()
  .create({
    errorFormatter({ shape, error }) {
      const app = error.cause instanceof AppError ? error.cause : undefined;
      // Unexpected errors keep their message in the logs only.
      const message = !app && error.code === 'INTERNAL_SERVER_ERROR' ? 'Internal server error' : shape.message;
      return { ...shape, message, data: { ...shape.data, appCode: app?.code ?? null, details: app?.details ?? null, stack: undefined } };
    },
  });

export const router = t.router;
export const createCallerFactory = t.createCallerFactory;

function bucketLimit(ctx: Context, bucket: RateLimitBucket): number {
  const c = ctx.deps.config;
  return { chat: c.RATE_LIMIT_CHAT, kbQuery: c.RATE_LIMIT_KB_QUERY, upload: c.RATE_LIMIT_UPLOAD, default: c.RATE_LIMIT_DEFAULT }[bucket];
}

/**
 * Every procedure is rate limited per endpoint and caller (owner, API key, or client IP when anonymous),
 * for REST, tRPC and GraphQL alike. Headers go to ctx.responseHeaders; refused calls never run.
 */
/**
 * Counts one call of `path` for the caller. Adapters may call it before the procedure runs (an upload is
 * limited before its body is read); the procedure's middleware then does not count the call again.
 */
export async function enforceRateLimit(ctx: Context, bucket: RateLimitBucket, path: string) {
  const caller = await ctx.getCaller();
  const who = caller.kind === 'owner' ? `o:${caller.owner.id}` : caller.kind === 'apiKey' ? `k:${caller.keyId}` : `ip:${clientKey(ctx.clientIp)}`;
  const limit = bucketLimit(ctx, bucket);
  const decision = await ctx.deps.rateLimiter.hit(`${bucket}:${path}:${who}`, limit, ctx.deps.config.RATE_LIMIT_WINDOW_SECONDS * 1000);
  ctx.responseHeaders['X-RateLimit-Limit'] = String(decision.limit);
  ctx.responseHeaders['X-RateLimit-Remaining'] = String(decision.remaining);
  ctx.responseHeaders['X-RateLimit-Reset'] = String(decision.resetAt);
  if (!decision.allowed) {
    ctx.responseHeaders['Retry-After'] = String(decision.retryAfterSeconds);
    throw new AppError('RATE_LIMITED', 'Rate limit exceeded', `Limit is ${limit} requests per ${ctx.deps.config.RATE_LIMIT_WINDOW_SECONDS} s; retry after ${decision.retryAfterSeconds} s`);
  }
}

const rateLimited = t.middleware(async ({ ctx, meta, path, next }) => {
  // Every call counts (a tRPC batch or GraphQL aliases are many calls), except the one a REST adapter
  // already counted before reading an upload's body: that pre-count is consumed here, once.
  if (ctx.rateLimitPrecounted === path) ctx.rateLimitPrecounted = undefined;
  else await enforceRateLimit(ctx, meta?.rateLimit ?? 'default', path);
  return next();
});

const base = t.procedure.use(rateLimited);

export const publicProcedure = base.meta({ auth: 'public' });

export const ownerProcedure = base.meta({ auth: 'session' }).use(async ({ ctx, next }) => {
  const caller = await ctx.getCaller();
  if (caller.kind === 'apiKey') throw new AppError('FORBIDDEN', 'This operation needs an owner session, not an API key');
  if (caller.kind !== 'owner') throw unauthorized(caller);
  return next({ ctx: { owner: caller.owner as OwnerPrincipal, sessionId: caller.sessionId } });
});

export const enterpriseProcedure = ownerProcedure.meta({ auth: 'enterprise' }).use(({ ctx, next }) => {
  if (ctx.owner.plan !== 'enterprise') throw new AppError('FORBIDDEN', 'This operation needs an enterprise account');
  return next();
});

export const adminProcedure = ownerProcedure.meta({ auth: 'admin' }).use(({ ctx, next }) => {
  if (ctx.owner.role !== 'admin') throw new AppError('FORBIDDEN', 'This operation needs admin permission');
  return next();
});

export const apiKeyProcedure = base.meta({ auth: 'apiKey' }).use(async ({ ctx, next }) => {
  const caller = await ctx.getCaller();
  if (caller.kind === 'owner') throw new AppError('FORBIDDEN', 'This operation needs an API key');
  if (caller.kind !== 'apiKey') throw unauthorized(caller);
  return next({ ctx: { apiKey: caller } });
});

/** Owner session or API key; the procedure narrows what each may see. */
export const ownerOrKeyProcedure = base.meta({ auth: 'sessionOrApiKey' }).use(async ({ ctx, next }) => {
  const caller = await ctx.getCaller();
  if (caller.kind === 'anonymous') throw unauthorized(caller);
  return next({ ctx: { caller } });
});

/** Internal cron calls: `Authorization: Bearer <CRON_SECRET>`, compared in constant time. */
export const cronProcedure = base.meta({ auth: 'cron' }).use(({ ctx, next }) => {
  const secret = ctx.deps.config.CRON_SECRET;
  const given = /^Bearer\s+(\S+)$/i.exec(ctx.authorization ?? '')?.[1] ?? '';
  // Digests have equal lengths whatever was sent, so the comparison itself can neither throw nor leak length.
  const digest = (value: string) => createHash('sha256').update(value).digest();
  const ok = secret !== undefined && given !== '' && timingSafeEqual(digest(given), digest(secret));
  if (!ok) throw new AppError('UNAUTHORIZED', 'Invalid cron secret');
  return next();
});

export { TRPCError };
