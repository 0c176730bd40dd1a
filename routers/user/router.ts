import { z } from 'zod';
import { timestamp, toIso } from '../../schema/common.ts';
import { ownerProcedure, router } from '../trpc.ts';
import { markTourCompleted } from '../auth/repository.ts';

export const userRouter = router({
  tourCompleted: ownerProcedure
    .meta({
      openapi: {
        method: 'POST',
        path: '/api/v1/user/tour-completed',
        tags: ['User'],
        summary: 'Mark the onboarding tour completed (idempotent)',
        protect: true,
      },
    })
    .input(z.object({}).optional())
    .output(z.object({ tourCompleted: z.literal(true), completedAt: timestamp }))
    .mutation(async ({ ctx }) => {
      const row = await markTourCompleted(ctx.deps.database.db, ctx.owner.id);
      return { tourCompleted: true as const, completedAt: toIso(row.tour_completed_at)! };
    }),
});
