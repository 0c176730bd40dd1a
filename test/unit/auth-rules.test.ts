import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { adminProcedure, cronProcedure, enterpriseProcedure, ownerOrKeyProcedure, router } from '../../routers/trpc.ts';
import { loadConfig } from '../../schema/config.ts';
import { createMemoryRateLimiter } from '../../adapters/outbound/rate-limit/memory.ts';
import type { AppDeps, Context } from '../../routers/context.ts';
import type { Caller } from '../../routers/auth/principal.ts';
import { toClientError } from '../../adapters/inbound/client-error.ts';

// The auth rules of the spec's column (E, A, I, S or K) on a tiny router, called the way every adapter calls them.
const rules = router({
  enterprise: enterpriseProcedure.input(z.object({}).optional()).query(() => 'ok'),
  admin: adminProcedure.input(z.object({}).optional()).query(() => 'ok'),
  cron: cronProcedure.input(z.object({}).optional()).mutation(() => 'ok'),
  either: ownerOrKeyProcedure.input(z.object({}).optional()).query(({ ctx }) => ctx.caller.kind),
});

const deps = { config: loadConfig({ CRON_SECRET: 'cron-secret-0123456789' }), rateLimiter: createMemoryRateLimiter() } as unknown as AppDeps;
const owner = (plan: 'free' | 'enterprise', role: 'owner' | 'admin' = 'owner'): Caller => ({
  kind: 'owner',
  sessionId: 's',
  owner: { id: `${plan}-${role}`, email: 'x@example.com', name: null, plan, role },
});
function caller(who: Caller, authorization?: string) {
  const ctx: Context = {
    deps,
    requestId: 'r',
    clientIp: '127.0.0.1',
    authorization,
    responseHeaders: {},
    response: {},
    acceptsEventStream: false,
    getCaller: async () => who,
  };
  return rules.createCaller(ctx);
}
async function codeOf(promise: Promise<unknown>) {
  try {
    await promise;
    return 'OK';
  } catch (error) {
    return toClientError(error).appError.code;
  }
}
const anonymous: Caller = { kind: 'anonymous', reason: 'missing' };
const apiKey: Caller = { kind: 'apiKey', keyId: 'k', ownerId: 'o', chatInterfaceId: 'c' };

describe('auth rules', () => {
  it('E: enterprise plan only; others 403, anonymous 401', async () => {
    expect(await codeOf(caller(owner('enterprise')).enterprise())).toBe('OK');
    expect(await codeOf(caller(owner('free')).enterprise())).toBe('FORBIDDEN');
    expect(await codeOf(caller(owner('free', 'admin')).enterprise())).toBe('FORBIDDEN');
    expect(await codeOf(caller(anonymous).enterprise())).toBe('UNAUTHORIZED');
    expect(await codeOf(caller(apiKey).enterprise())).toBe('FORBIDDEN');
  });

  it('A: admin role only', async () => {
    expect(await codeOf(caller(owner('free', 'admin')).admin())).toBe('OK');
    expect(await codeOf(caller(owner('enterprise')).admin())).toBe('FORBIDDEN');
    expect(await codeOf(caller(anonymous).admin())).toBe('UNAUTHORIZED');
  });

  it('I: the exact cron secret only', async () => {
    expect(await codeOf(caller(anonymous, 'Bearer cron-secret-0123456789').cron())).toBe('OK');
    expect(await codeOf(caller(anonymous, 'Bearer cron-secret-0123456788').cron())).toBe('UNAUTHORIZED');
    expect(await codeOf(caller(anonymous, 'Bearer cron-secret-01234567890').cron())).toBe('UNAUTHORIZED');
    // A valid credential of another kind is the wrong kind (403), even an admin's.
    expect(await codeOf(caller(owner('free', 'admin')).cron())).toBe('FORBIDDEN');
    expect(await codeOf(caller(anonymous).cron())).toBe('UNAUTHORIZED');
  });

  it('I without CRON_SECRET configured refuses everything', async () => {
    const bare = { ...deps, config: loadConfig({}) } as AppDeps;
    const ctx: Context = {
      deps: bare,
      requestId: 'r',
      clientIp: '1',
      authorization: 'Bearer ',
      responseHeaders: {},
      response: {},
      acceptsEventStream: false,
      getCaller: async () => anonymous,
    };
    expect(await codeOf(rules.createCaller(ctx).cron())).toBe('UNAUTHORIZED');
  });

  it('S or K: either credential, not anonymous', async () => {
    expect(await caller(owner('free')).either()).toBe('owner');
    expect(await caller(apiKey).either()).toBe('apiKey');
    expect(await codeOf(caller(anonymous).either())).toBe('UNAUTHORIZED');
  });
});
