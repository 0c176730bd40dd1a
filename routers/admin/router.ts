import { z } from 'zod';
import { AppError } from '../../schema/errors.ts';
import { queryInt } from '../../schema/common.ts';
import { ownerDetailSchema, planSchema, roleSchema, updateOwnerInput } from '../../schema/owners.ts';
import { adminProcedure, router } from '../trpc.ts';
import { listOwners, toOwnerDetail, updateOwnerPlanAndRole } from '../auth/repository.ts';

const tags = ['Admin'];

export const adminRouter = router({
  listOwners: adminProcedure
    .meta({ openapi: { method: 'GET', path: '/api/v1/admin/owners', tags, summary: 'All owners (newest first, paginated)', protect: true } })
    .input(
      z.object({
        limit: queryInt({ min: 1, max: 200 }).default(50),
        offset: queryInt({ min: 0, max: 1_000_000_000 }).default(0),
        plan: planSchema.optional(),
        role: roleSchema.optional(),
      }),
    )
    .output(z.object({ owners: z.array(ownerDetailSchema), count: z.number().int(), total: z.number().int() }))
    .query(async ({ ctx, input }) => {
      const { rows, total } = await listOwners(ctx.deps.database.db, { plan: input.plan, role: input.role }, { limit: input.limit, offset: input.offset });
      return { owners: rows.map(toOwnerDetail), count: rows.length, total };
    }),

  updateOwner: adminProcedure
    .meta({ openapi: { method: 'PATCH', path: '/api/v1/admin/owners/{id}', tags, summary: "Change an owner's plan or role", protect: true } })
    .input(updateOwnerInput)
    .output(z.object({ owner: ownerDetailSchema }))
    .mutation(async ({ ctx, input }) => {
      const row = await updateOwnerPlanAndRole(ctx.deps.database.db, input.id, { plan: input.plan, role: input.role });
      if (!row) throw new AppError('NOT_FOUND', 'Owner not found');
      return { owner: toOwnerDetail(row) };
    }),
});
