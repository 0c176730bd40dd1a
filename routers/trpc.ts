import { initTRPC, TRPCError } from '@trpc/server';
import type { OpenApiMeta } from 'trpc-to-openapi';
import { AppError, type ErrorCode } from '../schema/errors.ts';
import type { Context } from './context.ts';
import { bearerToken, unauthorized } from './auth/caller.ts';
import { sameSecret } from '../adapters/outbound/secrets.ts';
import type { Caller, OwnerPrincipal } from './auth/principal.ts';
import { clientKey } from '../adapters/outbound/rate-limit/client-key.ts';
import { findIllFormedText } from '../schema/text-input.ts';
import { PLAN_RULES } from '../schema/plans.ts';

export type AuthRule = 'public' | 'session' | 'apiKey' | 'sessionOrApiKey' | 'visitor' | 'enterprise' | 'admin' | 'cron' | 'billingSignature';
export type RateLimitBucket = 'chat' | 'kbQuery' | 'upload' | 'visitorSession' | 'support' | 'default';

/**
 * The error responses a procedure documents beyond those every operation has, keyed by the code it throws: which
 * HTTP status a code gets is the inbound adapters' one mapping (adapters/inbound/http-status.ts), not the router's.
 */
export type ErrorResponses = Partial<Record<ErrorCode, string>>;

/** trpc-to-openapi's fields, except that errorResponses is keyed by our error codes rather than by HTTP status. */
type OpenApiFields = Omit<NonNullable<OpenApiMeta['openapi']>, 'errorResponses'> & { errorResponses?: ErrorResponses };

/** What a procedure declares about itself; adapters read it, nothing else decides these things. */
export type AppMeta = {
  openapi?: OpenApiFields;
  auth?: AuthRule;
  rateLimit?: RateLimitBucket;
  /** HTTP status of success on REST (201 for creates). */
  successStatus?: 200 | 201 | 202;
  /** A second success status the procedure may set through ctx.response.status (same body schema), for the OpenAPI document. */
  otherSuccess?: { status: 200 | 201 | 202; description: string };
  /** Flat REST shape (`success` beside the fields, no `data`), as the spec shows for a few operations. */
  flat?: boolean;
  /** REST body is multipart/form-data: the adapter parses it into the input (`file` + text fields), capped
   *  at maxBytes, or at the caller's plan limit with 'plan'. */
  multipart?: { fileField: string; maxBytes: number | 'plan' };
  /** REST answer may be Server-Sent Events: when the output is an async iterable of JSON events, it is streamed. */
  sse?: boolean;
  /** REST body is kept as sent (for a signature over its bytes): the input is `{ payload, signature }`, the body as UTF-8
   *  text and the value of the named header. */
  rawBody?: { signatureHeader: string };
  /** REST answer is raw bytes: the output is `{ contentType, body: Uint8Array, cacheControl? }`. */
  rawResponse?: boolean;
};

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

type Settings = Context['deps']['config'];
type NumericSetting = { [K in keyof Settings]: Settings[K] extends number ? K : never }[keyof Settings];
export type RateLimitScope = 'perCallerPerOperation' | 'perVisitorIp' | 'shared';

/**
 * Every budget calls are counted against and the setting that sizes it, read by enforcement and by the admin view
 * (routers/admin/rate-limits.ts). Keys: `<bucket>:<path>:<caller>` per caller and operation, `visitorIp:<client>`
 * for all visitor calls from one client, `shared:<name>` for a budget everyone shares.
 */
export const RATE_LIMIT_BUDGETS = {
  chat: { scope: 'perCallerPerOperation', setting: 'RATE_LIMIT_CHAT' },
  kbQuery: { scope: 'perCallerPerOperation', setting: 'RATE_LIMIT_KB_QUERY' },
  upload: { scope: 'perCallerPerOperation', setting: 'RATE_LIMIT_UPLOAD' },
  visitorSession: { scope: 'perCallerPerOperation', setting: 'RATE_LIMIT_VISITOR_SESSIONS' },
  support: { scope: 'perCallerPerOperation', setting: 'RATE_LIMIT_SUPPORT' },
  default: { scope: 'perCallerPerOperation', setting: 'RATE_LIMIT_DEFAULT' },
  visitorIp: { scope: 'perVisitorIp', setting: 'RATE_LIMIT_VISITOR_IP' },
  'support-contact': { scope: 'shared', setting: 'RATE_LIMIT_SUPPORT_GLOBAL' },
} as const satisfies Record<RateLimitBucket, { scope: 'perCallerPerOperation'; setting: NumericSetting }> &
  Record<string, { scope: RateLimitScope; setting: NumericSetting }>;

function bucketLimit(ctx: Context, bucket: RateLimitBucket): number {
  return ctx.deps.config[RATE_LIMIT_BUDGETS[bucket].setting];
}

function callerKey(caller: Caller, clientIp: string) {
  if (caller.kind === 'owner') return `o:${caller.owner.id}`;
  if (caller.kind === 'apiKey') return `k:${caller.keyId}`;
  if (caller.kind === 'visitor') return `v:${caller.visitorId}`;
  return `ip:${clientKey(clientIp)}`;
}

/**
 * Every procedure is rate limited per endpoint and caller (owner, API key, or client IP when anonymous),
 * for REST, tRPC and GraphQL alike. Headers go to ctx.responseHeaders; refused calls never run. Counts one call
 * of `path` for the caller. Adapters may call it before the procedure runs (an upload is limited before its body
 * is read); the procedure's middleware then does not count the call again.
 */
export async function enforceRateLimit(ctx: Context, bucket: RateLimitBucket, path: string, auth?: AppMeta['auth']) {
  const caller = await ctx.getCaller();
  // A public operation (sign-in, sign-up, minting a visitor token) and the contact form count per client IP whoever
  // calls: a credential sent along, and a visitor token is free to mint, must not buy a budget of its own (an attack
  // pass made 300 sign-in guesses a minute past the IP's limit, and minted visitors without end, that way).
  const who = bucket === 'support' || auth === 'public' ? `ip:${clientKey(ctx.clientIp)}` : callerKey(caller, ctx.clientIp);
  await countHit(ctx, `${bucket}:${path}:${who}`, bucketLimit(ctx, bucket));
}

/**
 * A budget shared by every caller of something (the contact form's global burst budget): distributed bots each
 * stay under a per-IP limit, but not under this one. Refusals look like any other 429.
 */
export async function enforceSharedBudget(ctx: Context, name: string, limit: number) {
  await countHit(ctx, `shared:${name}`, limit);
}

async function countHit(ctx: Context, key: string, limit: number) {
  const decision = await ctx.deps.rateLimiter.hit(key, limit, ctx.deps.config.RATE_LIMIT_WINDOW_SECONDS * 1000);
  // A call may count against several budgets (per caller, per client IP, shared). The headers describe the one
  // nearest to refusing, so a client that pauses when Remaining reaches 0 is never refused while it reads more.
  const shown = ctx.responseHeaders['X-RateLimit-Remaining'];
  if (shown === undefined || !decision.allowed || decision.remaining < Number(shown)) {
    ctx.responseHeaders['X-RateLimit-Limit'] = String(decision.limit);
    ctx.responseHeaders['X-RateLimit-Remaining'] = String(decision.remaining);
    ctx.responseHeaders['X-RateLimit-Reset'] = String(decision.resetAt);
  }
  if (!decision.allowed) {
    ctx.responseHeaders['Retry-After'] = String(decision.retryAfterSeconds);
    await noteRefusal(ctx, key);
    throw new AppError(
      'RATE_LIMITED',
      'Rate limit exceeded',
      `Limit is ${limit} requests per ${ctx.deps.config.RATE_LIMIT_WINDOW_SECONDS} s; retry after ${decision.retryAfterSeconds} s`,
    );
  }
}

/**
 * What a refusal leaves for operators. The caller is already resolved (the limit was keyed on it), so this costs no
 * lookup. The limit is named without the caller part of its key (`default:apiKeys.list`, `shared:support-contact`).
 */
async function noteRefusal(ctx: Context, key: string) {
  const caller = await ctx.getCaller();
  const scope =
    caller.kind === 'owner'
      ? { ownerId: caller.owner.id }
      : caller.kind === 'apiKey'
        ? { ownerId: caller.ownerId, chatInterfaceId: caller.chatInterfaceId }
        : caller.kind === 'visitor'
          ? { chatInterfaceId: caller.chatInterfaceId }
          : {};
  const limit = key.startsWith('visitorIp:') ? 'visitorIp' : key.split(':', 2).join(':');
  ctx.deps.securityEvents.record('rate_limited', { ...scope, ip: ctx.clientIp, detail: { limit } });
}

/**
 * Every call counts (a tRPC batch or GraphQL aliases are many calls), except the one a REST adapter already counted
 * before reading an upload's body: that pre-count is consumed here, once.
 */
async function countCall(ctx: Context, meta: AppMeta | undefined, path: string) {
  if (ctx.rateLimitPrecounted === path) ctx.rateLimitPrecounted = undefined;
  else await enforceRateLimit(ctx, meta?.rateLimit ?? 'default', path, meta?.auth);
}

/**
 * The one place every input passes through (REST body, query and path parameters, tRPC and GraphQL arguments):
 * text that PostgreSQL cannot store is a 400 naming the field. It runs after authentication (an anonymous caller
 * learns nothing about validation) and before the input schema, so no procedure has to think about it.
 */
async function checkStorableText(getRawInput: () => Promise<unknown>) {
  const found = findIllFormedText(await getRawInput());
  if (found) throw new AppError('VALIDATION_FAILED', 'Invalid request parameters', `${found.path}: ${found.problem}`);
}

/**
 * One middleware per kind of caller, in a fixed order: the rate limit, then who may call (which may add to the
 * context), then the text check. It is one layer rather than three because tRPC copies its options for each layer,
 * and on the hottest routes those copies were a seventh of a request's time.
 */
function guarded<Added extends object>(authorize: (ctx: Context) => Added | Promise<Added>) {
  return t.middleware(async ({ ctx, meta, path, getRawInput, next }) => {
    await countCall(ctx, meta, path);
    const added = await authorize(ctx);
    await checkStorableText(getRawInput);
    return next({ ctx: added });
  });
}

/** The same for callers that add nothing to the context: no context to copy either. */
function guardedAsIs(authorize: (ctx: Context) => void | Promise<void>) {
  return t.middleware(async ({ ctx, meta, path, getRawInput, next }) => {
    await countCall(ctx, meta, path);
    await authorize(ctx);
    await checkStorableText(getRawInput);
    return next();
  });
}

export const publicProcedure = t.procedure.meta({ auth: 'public' }).use(guardedAsIs(() => {}));

async function signedInOwner(ctx: Context) {
  const caller = await ctx.getCaller();
  if (caller.kind === 'apiKey') throw new AppError('FORBIDDEN', 'This operation needs an owner session, not an API key');
  if (caller.kind === 'visitor') throw new AppError('FORBIDDEN', 'This operation needs an owner session, not a visitor token');
  if (caller.kind !== 'owner') throw unauthorized(caller);
  return { owner: caller.owner as OwnerPrincipal, sessionId: caller.sessionId };
}

export const ownerProcedure = t.procedure.meta({ auth: 'session' }).use(guarded(signedInOwner));

export const enterpriseProcedure = t.procedure.meta({ auth: 'enterprise' }).use(
  guarded(async (ctx) => {
    const added = await signedInOwner(ctx);
    if (!PLAN_RULES[added.owner.plan].enterpriseWebhooks) throw new AppError('FORBIDDEN', 'This operation needs an enterprise account');
    return added;
  }),
);

export const adminProcedure = t.procedure.meta({ auth: 'admin' }).use(
  guarded(async (ctx) => {
    const added = await signedInOwner(ctx);
    if (added.owner.role !== 'admin') throw new AppError('FORBIDDEN', 'This operation needs admin permission');
    return added;
  }),
);

export const apiKeyProcedure = t.procedure.meta({ auth: 'apiKey' }).use(
  guarded(async (ctx) => {
    const caller = await ctx.getCaller();
    if (caller.kind === 'owner' || caller.kind === 'visitor') throw new AppError('FORBIDDEN', 'This operation needs an API key');
    if (caller.kind !== 'apiKey') throw unauthorized(caller);
    return { apiKey: caller };
  }),
);

/** Owner session or API key; the procedure narrows what each may see. */
export const ownerOrKeyProcedure = t.procedure.meta({ auth: 'sessionOrApiKey' }).use(
  guarded(async (ctx) => {
    const caller = await ctx.getCaller();
    if (caller.kind === 'anonymous') throw unauthorized(caller);
    if (caller.kind === 'visitor') throw new AppError('FORBIDDEN', 'This operation needs an owner session or an API key');
    return { caller };
  }),
);

/**
 * A visitor of a public chat interface. Besides the per-visitor limit every procedure has, all visitor traffic
 * from one IP address shares one budget: minting visitors does not multiply what one client may send.
 */
export const visitorProcedure = t.procedure.meta({ auth: 'visitor' }).use(
  guarded(async (ctx) => {
    const caller = await ctx.getCaller();
    if (caller.kind === 'anonymous') throw unauthorized(caller);
    if (caller.kind !== 'visitor') throw new AppError('FORBIDDEN', 'This operation needs a visitor token');
    await countHit(ctx, `visitorIp:${clientKey(ctx.clientIp)}`, ctx.deps.config.RATE_LIMIT_VISITOR_IP);
    return { visitor: caller };
  }),
);

/** Internal cron calls: `Authorization: Bearer <CRON_SECRET>`, compared in constant time. */
export const cronProcedure = t.procedure.meta({ auth: 'cron' }).use(
  guardedAsIs(async (ctx) => {
    const secret = ctx.deps.config.CRON_SECRET;
    if (secret !== undefined && sameSecret(bearerToken(ctx.authorization) ?? '', secret)) return;
    // A valid credential of another kind is the wrong kind (403), as everywhere else; anything else is 401.
    const caller = await ctx.getCaller();
    if (caller.kind !== 'anonymous') throw new AppError('FORBIDDEN', 'This operation needs the cron secret');
    throw new AppError('UNAUTHORIZED', 'Invalid cron secret');
  }),
);

/**
 * The billing provider's calls: no bearer credential; the procedure verifies the provider's signature over the raw
 * body (a bad one is a 400, as the provider expects, and changes nothing).
 */
export const billingSignatureProcedure = t.procedure.meta({ auth: 'billingSignature' }).use(async ({ ctx, meta, path, next }) => {
  await countCall(ctx, meta, path);
  return next();
});

export { TRPCError };
