import { z } from 'zod';
import { sql } from 'kysely';
import { jsonb } from '../../db/json.ts';
import { AppError } from '../../schema/errors.ts';
import { timestamp, toIso } from '../../schema/common.ts';
import { ownerProcedure, router } from '../trpc.ts';

const tags = ['Cache'];
const jsonValue = z.json().meta({ description: 'Any JSON value (the client query cache)' });

/** One JSON blob per owner: a dashboard persists its client-side query cache here between devices. */
export const cacheRouter = router({
  save: ownerProcedure
    .meta({ openapi: { method: 'POST', path: '/api/v1/cache/query-cache/save', tags, summary: 'Save the client query cache (replaces the previous one)', protect: true } })
    .input(z.object({ data: jsonValue }))
    .output(z.object({ saved: z.literal(true), sizeBytes: z.number().int(), updatedAt: timestamp }))
    .mutation(async ({ ctx, input }) => {
      const serialized = JSON.stringify(input.data);
      const sizeBytes = Buffer.byteLength(serialized);
      const cap = ctx.deps.config.QUERY_CACHE_LIMIT_BYTES;
      if (sizeBytes > cap) throw new AppError('PAYLOAD_TOO_LARGE', 'Query cache too large', `data: ${sizeBytes} bytes, limit ${cap} bytes`);
      const now = new Date();
      await ctx.deps.database.db
        .insertInto('query_cache')
        .values({ owner_id: ctx.owner.id, data: jsonb(input.data), size_bytes: sizeBytes, updated_at: now })
        .onConflict((oc) => oc.column('owner_id').doUpdateSet({ data: sql`excluded.data`, size_bytes: sizeBytes, updated_at: now }))
        .execute();
      return { saved: true as const, sizeBytes, updatedAt: now.toISOString() };
    }),

  restore: ownerProcedure
    .meta({ openapi: { method: 'POST', path: '/api/v1/cache/query-cache/restore', tags, summary: 'Restore the saved query cache (data is null when none is saved)', protect: true } })
    .input(z.object({}).optional())
    .output(z.object({ data: jsonValue.nullable(), updatedAt: timestamp.nullable() }))
    .mutation(async ({ ctx }) => {
      const row = await ctx.deps.database.db.selectFrom('query_cache').select(['data', 'updated_at']).where('owner_id', '=', ctx.owner.id).executeTakeFirst();
      return { data: (row?.data ?? null) as z.infer<typeof jsonValue> | null, updatedAt: row ? toIso(row.updated_at) : null };
    }),

  remove: ownerProcedure
    .meta({ openapi: { method: 'POST', path: '/api/v1/cache/query-cache/remove', tags, summary: 'Remove the saved query cache', protect: true } })
    .input(z.object({}).optional())
    .output(z.object({ removed: z.boolean() }))
    .mutation(async ({ ctx }) => {
      const result = await ctx.deps.database.db.deleteFrom('query_cache').where('owner_id', '=', ctx.owner.id).executeTakeFirst();
      return { removed: Number(result.numDeletedRows) > 0 };
    }),
});
