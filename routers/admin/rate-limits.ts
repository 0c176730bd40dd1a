import { z } from 'zod';
import { queryInt, timestamp } from '../../schema/common.ts';
import { adminProcedure, RATE_LIMIT_BUDGETS, type RateLimitScope } from '../trpc.ts';

/** Keys read per look: the answer stays quick however many callers there are (`truncated` says when it stopped). */
const MAX_KEYS = 10_000;

type Bucket = keyof typeof RATE_LIMIT_BUDGETS;
const BUCKETS = Object.keys(RATE_LIMIT_BUDGETS) as [Bucket, ...Bucket[]];
const bucketSchema = z.enum(BUCKETS);
const SCOPES = ['perCallerPerOperation', 'perVisitorIp', 'shared'] as const satisfies readonly RateLimitScope[];
type CallerKind = 'owner' | 'apiKey' | 'visitor' | 'ip' | 'shared';
/** The caller part of a per-caller key, as routers/trpc.ts writes it. */
const CALLER_KINDS = new Map<string, CallerKind>([
  ['o', 'owner'],
  ['k', 'apiKey'],
  ['v', 'visitor'],
  ['ip', 'ip'],
]);

interface ParsedKey {
  bucket: Bucket;
  operation: string | null;
  callerKind: CallerKind;
  callerId: string | null;
}

const isBudget = (name: string, scope: RateLimitScope): name is Bucket =>
  Object.hasOwn(RATE_LIMIT_BUDGETS, name) && RATE_LIMIT_BUDGETS[name as Bucket].scope === scope;

/** Reads a key in one of the forms routers/trpc.ts counts under; undefined for anything else. */
function parseKey(key: string): ParsedKey | undefined {
  const colon = key.indexOf(':');
  const head = key.slice(0, colon);
  const rest = key.slice(colon + 1);
  if (colon < 1 || rest === '') return undefined;
  if (head === 'visitorIp') return { bucket: 'visitorIp', operation: null, callerKind: 'ip', callerId: rest };
  if (head === 'shared') return isBudget(rest, 'shared') ? { bucket: rest, operation: null, callerKind: 'shared', callerId: null } : undefined;
  if (!isBudget(head, 'perCallerPerOperation')) return undefined;
  // `<path>:<kind>:<id>`: paths hold no colon, an IPv6 client key does.
  const pathEnd = rest.indexOf(':');
  const kindEnd = rest.indexOf(':', pathEnd + 1);
  if (pathEnd < 1 || kindEnd < 0) return undefined;
  const callerKind = CALLER_KINDS.get(rest.slice(pathEnd + 1, kindEnd));
  const callerId = rest.slice(kindEnd + 1);
  if (!callerKind || callerId === '') return undefined;
  return { bucket: head, operation: rest.slice(0, pathEnd), callerKind, callerId };
}

/** Narrows the store's read to one bucket's keys. */
function keyPrefixOf(bucket: Bucket): string {
  const { scope } = RATE_LIMIT_BUDGETS[bucket];
  return scope === 'shared' ? `shared:${bucket}` : `${bucket}:`;
}

const output = z.object({
  store: z.enum(['memory', 'redis']).meta({
    description: "Where the counts were read: Redis (every instance's), or this instance's memory (without Redis, or while it is unreachable)",
  }),
  windowSeconds: z.number().int().meta({ description: 'Every limit counts requests in this sliding window' }),
  buckets: z.array(
    z.object({
      bucket: bucketSchema,
      appliesTo: z.enum(SCOPES).meta({
        description:
          'perCallerPerOperation: each caller (owner, API key, visitor, or client IP when anonymous) per operation; perVisitorIp: all visitor calls from one client IP; shared: everyone together',
      }),
      limit: z.number().int().meta({ description: 'Requests allowed per window' }),
      setting: z.string().meta({ description: 'The environment variable that sets the limit' }),
    }),
  ),
  callers: z
    .array(
      z.object({
        bucket: bucketSchema,
        operation: z.string().nullable().meta({
          description:
            'The procedure path (`admin.status`), or `(unmatched)` for REST requests that name no operation or use a wrong method; null for per-IP and shared budgets',
        }),
        callerKind: z.enum(['owner', 'apiKey', 'visitor', 'ip', 'shared']),
        callerId: z.string().nullable().meta({ description: 'Owner, API key or visitor id, or client IP (IPv6 by /64); null for a shared budget' }),
        count: z.number().int().meta({ description: 'Requests counted in the window now' }),
        limit: z.number().int(),
        remaining: z.number().int(),
        usedRatio: z.number().meta({ description: 'count / limit, to 4 decimals' }),
        resetsAt: timestamp.meta({ description: 'When the oldest counted request leaves the window, freeing a slot' }),
      }),
    )
    .meta({ description: 'The callers nearest their limits, highest usedRatio first (then higher count)' }),
  scanned: z
    .number()
    .int()
    .meta({ description: `Counters read (at most ${MAX_KEYS})` }),
  truncated: z.boolean().meta({ description: 'True when the bound stopped the read: callers may miss some' }),
});

export const rateLimitsProcedure = adminProcedure
  .meta({
    openapi: {
      method: 'GET',
      path: '/api/v1/admin/rate-limits',
      tags: ['Admin'],
      summary: 'Rate limits: every budget with its limit, and the callers nearest their limits now',
      description: `Reads at most ${MAX_KEYS} counters (Redis: SCAN over the key prefix, then counts in pipelines). Reading changes no counter; the call itself counts like any other.`,
      protect: true,
    },
  })
  .input(
    z.object({
      top: queryInt({ min: 1, max: 200 }).default(20).meta({ description: 'How many callers to return' }),
      bucket: bucketSchema.meta({ description: 'Only callers counted against this bucket' }).optional(),
    }),
  )
  .output(output)
  .query(async ({ ctx, input }) => {
    const config = ctx.deps.config;
    const windowMs = config.RATE_LIMIT_WINDOW_SECONDS * 1000;
    const limitOfBucket = (bucket: Bucket) => config[RATE_LIMIT_BUDGETS[bucket].setting];
    const snapshot = await ctx.deps.rateLimiter.busiest({
      windowMs,
      maxKeys: MAX_KEYS,
      top: input.top,
      keyPrefix: input.bucket === undefined ? undefined : keyPrefixOf(input.bucket),
      limitOf: (key) => {
        const parsed = parseKey(key);
        if (!parsed || (input.bucket !== undefined && parsed.bucket !== input.bucket)) return undefined;
        return limitOfBucket(parsed.bucket);
      },
    });
    return {
      store: snapshot.store,
      windowSeconds: config.RATE_LIMIT_WINDOW_SECONDS,
      buckets: BUCKETS.map((bucket) => ({
        bucket,
        appliesTo: RATE_LIMIT_BUDGETS[bucket].scope,
        limit: limitOfBucket(bucket),
        setting: RATE_LIMIT_BUDGETS[bucket].setting,
      })),
      callers: snapshot.entries.flatMap((entry) => {
        const parsed = parseKey(entry.key);
        if (!parsed) return [];
        return [
          {
            ...parsed,
            count: entry.count,
            limit: entry.limit,
            remaining: Math.max(0, entry.limit - entry.count),
            usedRatio: Math.round((entry.count / entry.limit) * 10_000) / 10_000,
            resetsAt: new Date(entry.oldestMs + windowMs).toISOString(),
          },
        ];
      }),
      scanned: snapshot.scanned,
      truncated: snapshot.truncated,
    };
  });
