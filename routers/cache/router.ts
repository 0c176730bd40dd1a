import { z } from 'zod';
import { AppError } from '../../schema/errors.ts';
import { timestamp, toIso } from '../../schema/common.ts';
import { ownerProcedure, router } from '../trpc.ts';
import { deleteQueryCache, findQueryCache, saveQueryCache } from './repository.ts';

const tags = ['Cache'];
const jsonValue = z.json().meta({ description: 'Any JSON value (the client query cache)' });

/** One JSON blob per owner: a dashboard persists its client-side query cache here between devices. */
export const cacheRouter = router({
  save: ownerProcedure
    .meta({
      openapi: {
        method: 'POST',
        path: '/api/v1/cache/query-cache/save',
        tags,
        summary: 'Save the client query cache (replaces the previous one)',
        protect: true,
      },
    })
    .input(z.object({ data: jsonValue }))
    .output(z.object({ saved: z.literal(true), sizeBytes: z.number().int(), updatedAt: timestamp }))
    .mutation(async ({ ctx, input }) => {
      const serialized = JSON.stringify(input.data);
      const sizeBytes = Buffer.byteLength(serialized);
      const cap = ctx.deps.config.QUERY_CACHE_LIMIT_BYTES;
      if (sizeBytes > cap) throw new AppError('PAYLOAD_TOO_LARGE', 'Query cache too large', `data: ${sizeBytes} bytes, limit ${cap} bytes`);
      const now = new Date();
      await saveQueryCache(ctx.deps.database.db, ctx.owner.id, { data: input.data, sizeBytes, updatedAt: now });
      return { saved: true as const, sizeBytes, updatedAt: now.toISOString() };
    }),

  restore: ownerProcedure
    .meta({
      openapi: {
        method: 'POST',
        path: '/api/v1/cache/query-cache/restore',
        tags,
        summary: 'Restore the saved query cache (data is null when none is saved)',
        protect: true,
      },
    })
    .input(z.object({}).optional())
    .output(z.object({ data: jsonValue.nullable(), updatedAt: timestamp.nullable() }))
    .mutation(async ({ ctx }) => {
      const row = await findQueryCache(ctx.deps.database.db, ctx.owner.id);
      return { data: (row?.data ?? null) as z.infer<typeof jsonValue> | null, updatedAt: row ? toIso(row.updated_at) : null };
    }),

  remove: ownerProcedure
    .meta({ openapi: { method: 'POST', path: '/api/v1/cache/query-cache/remove', tags, summary: 'Remove the saved query cache', protect: true } })
    .input(z.object({}).optional())
    .output(z.object({ removed: z.boolean() }))
    .mutation(async ({ ctx }) => {
      return { removed: await deleteQueryCache(ctx.deps.database.db, ctx.owner.id) };
    }),
});
