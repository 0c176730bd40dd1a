import { z } from 'zod';
import { timestamp, toIso } from '../../schema/common.ts';
import { ownerProcedure, router } from '../trpc.ts';

export const userRouter = router({
  tourCompleted: ownerProcedure
    .meta({ openapi: { method: 'POST', path: '/api/v1/user/tour-completed', tags: ['User'], summary: 'Mark the onboarding tour completed (idempotent)', protect: true } })
    .input(z.object({}).optional())
    .output(z.object({ tourCompleted: z.literal(true), completedAt: timestamp }))
    .mutation(async ({ ctx }) => {
      const db = ctx.deps.database.db;
      // Keep the first completion time: repeating the call changes nothing.
      const row = await db
        .updateTable('owners')
        .set((eb) => ({ tour_completed_at: eb.fn.coalesce('tour_completed_at', eb.val(new Date())) }))
        .where('id', '=', ctx.owner.id)
        .returning(['tour_completed_at'])
        .executeTakeFirstOrThrow();
      return { tourCompleted: true as const, completedAt: toIso(row.tour_completed_at)! };
    }),
});
