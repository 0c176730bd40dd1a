import { initTRPC, TRPCError } from '@trpc/server';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { procedureRunner } from './call-procedure.ts';

interface TestContext {
  user?: string;
  seen: string[];
}

const t = initTRPC.context<TestContext>().meta<{ label: string }>().create();

class Refusal extends Error {}

const authorized = t.procedure.meta({ label: 'authorized' }).use(async ({ ctx, meta, path, type, next }) => {
  ctx.seen.push(`guard ${path} ${type} ${meta?.label}`);
  if (!ctx.user) throw new Refusal('no user');
  return next({ ctx: { role: ctx.user === 'root' ? 'admin' : 'member' } });
});

const appRouter = t.router({
  greet: authorized
    .use(async ({ ctx, getRawInput, next }) => {
      ctx.seen.push(`raw ${JSON.stringify(await getRawInput())}`);
      return next({ ctx: { greeting: 'Hello' } });
    })
    .input(
      z.object({
        name: z
          .string()
          .min(1)
          .transform((name) => name.trim()),
        times: z.coerce.number().int().max(3).default(1),
      }),
    )
    .output(z.object({ text: z.string(), role: z.string() }))
    .query(({ ctx, input }) => ({ text: `${ctx.greeting} ${input.name}`.repeat(input.times), role: ctx.role })),
  nested: t.router({
    echo: t.procedure
      .use(({ next }) => next({ input: { replaced: true } }))
      .input(z.object({ replaced: z.boolean() }))
      .mutation(({ input }) => input),
  }),
  badOutput: t.procedure.output(z.object({ n: z.number() })).query(() => ({ n: 'not a number' }) as unknown as { n: number }),
  throws: t.procedure.query(() => {
    throw new Refusal('from the resolver');
  }),
});

const viaCaller = (path: string, ctx: TestContext, input: unknown) =>
  path.split('.').reduce<any>((node, key) => node[key], appRouter.createCaller(ctx))(input) as Promise<unknown>;
const viaRunner = (path: string, ctx: TestContext, input: unknown) => procedureRunner(appRouter, path)(ctx, input);

/** Both ways of calling, settled the same way (the value, or the error's class, code, message and cause). */
async function outcome(call: Promise<unknown>) {
  try {
    return { value: await call };
  } catch (error) {
    const cause = error instanceof TRPCError ? error.cause : undefined;
    return {
      error: error instanceof TRPCError ? 'TRPCError' : String(error),
      code: (error as TRPCError).code,
      message: (error as Error).message,
      cause: cause ? { name: cause.constructor.name, message: cause.message } : undefined,
    };
  }
}

describe('procedureRunner: a procedure called as tRPC calls it', () => {
  const cases: Array<[string, string, TestContext, unknown]> = [
    [
      'middlewares add to the context, the input is parsed and transformed, the output validated',
      'greet',
      { user: 'ann', seen: [] },
      { name: ' Ann ', times: '2' },
    ],
    ['an admin, through the same middleware', 'greet', { user: 'root', seen: [] }, { name: 'Root' }],
    ['a middleware refusing', 'greet', { seen: [] }, { name: 'x' }],
    ['input that fails its schema', 'greet', { user: 'ann', seen: [] }, { name: '', times: 9 }],
    ['a middleware replacing the input, under a nested router', 'nested.echo', { seen: [] }, { replaced: 'no' }],
    ['output that fails its schema', 'badOutput', { seen: [] }, undefined],
    ['a resolver throwing', 'throws', { seen: [] }, undefined],
  ];
  for (const [name, path, ctx, input] of cases) {
    it(`matches createCaller: ${name}`, async () => {
      const callerContext = structuredClone(ctx);
      const runnerContext = structuredClone(ctx);
      const expected = await outcome(viaCaller(path, callerContext, input));
      const actual = await outcome(viaRunner(path, runnerContext, input));
      expect(actual).toEqual(expected);
      // The same layers ran, in the same order, with the same path, type, meta and raw input.
      expect(runnerContext.seen).toEqual(callerContext.seen);
    });
  }

  it('answers what the resolver returned, and a refusal as a TRPCError whose cause is what was thrown', async () => {
    const ctx: TestContext = { user: 'ann', seen: [] };
    expect(await viaRunner('greet', ctx, { name: 'Ann', times: 2 })).toEqual({ text: 'Hello AnnHello Ann', role: 'member' });
    expect(ctx.seen).toEqual(['guard greet query authorized', 'raw {"name":"Ann","times":2}']);
    const refused = await viaRunner('greet', { seen: [] }, { name: 'x' }).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(TRPCError);
    expect((refused as TRPCError).cause).toBeInstanceOf(Refusal);
  });

  it('leaves the given context as it was: what a middleware adds goes to a copy', async () => {
    const ctx: TestContext & { role?: string } = { user: 'ann', seen: [] };
    await viaRunner('greet', ctx, { name: 'Ann' });
    expect(ctx.role).toBeUndefined();
    expect(Object.keys(ctx)).toEqual(['user', 'seen']);
  });

  it('refuses a path with no procedure when it is built, not when called', () => {
    expect(() => procedureRunner(appRouter, 'nested')).toThrow(/no procedure at nested/);
    expect(() => procedureRunner(appRouter, 'missing.path')).toThrow(/no procedure/);
  });
});
