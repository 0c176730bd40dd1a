import { z } from 'zod';
import { AppError } from '../../schema/errors.ts';
import { publicProcedure, router } from '../trpc.ts';

const startedAt = Date.now();

export const healthRouter = router({
  hosting: publicProcedure
    .meta({
      openapi: {
        method: 'GET',
        path: '/api/v1/health/hosting',
        tags: ['Health'],
        summary: 'Liveness and database check (503 when the database is down)',
        errorResponses: { SERVICE_UNAVAILABLE: 'Database unreachable' },
      },
    })
    .input(z.object({}).optional())
    .output(
      z.object({
        status: z.literal('ok'),
        uptimeSeconds: z.number().int(),
        database: z.object({ status: z.literal('up'), kind: z.enum(['pglite', 'postgres']), latencyMs: z.number() }),
      }),
    )
    .query(async ({ ctx }) => {
      const t0 = performance.now();
      try {
        await ctx.deps.database.ping();
      } catch {
        throw new AppError('SERVICE_UNAVAILABLE', 'Database unreachable', 'database: down');
      }
      return {
        status: 'ok' as const,
        uptimeSeconds: Math.floor((Date.now() - startedAt) / 1000),
        database: { status: 'up' as const, kind: ctx.deps.database.kind, latencyMs: Math.round((performance.now() - t0) * 100) / 100 },
      };
    }),
});
