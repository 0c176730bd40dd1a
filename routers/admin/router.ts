import { z } from 'zod';
import { AppError } from '../../schema/errors.ts';
import { isUuid } from '../../schema/common.ts';
import { ownerDetailSchema, planSchema, roleSchema, updateOwnerInput } from '../../schema/owners.ts';
import { adminProcedure, router } from '../trpc.ts';
import { toOwnerDetail } from '../auth/repository.ts';

const tags = ['Admin'];

export const adminRouter = router({
  listOwners: adminProcedure
    .meta({ openapi: { method: 'GET', path: '/api/v1/admin/owners', tags, summary: 'All owners (newest first, paginated)', protect: true } })
    .input(
      z.object({
        limit: z.coerce.number().int().min(1).max(200).default(50),
        offset: z.coerce.number().int().min(0).default(0),
        plan: planSchema.optional(),
        role: roleSchema.optional(),
      }),
    )
    .output(z.object({ owners: z.array(ownerDetailSchema), count: z.number().int(), total: z.number().int() }))
    .query(async ({ ctx, input }) => {
      let query = ctx.deps.database.db.selectFrom('owners');
      if (input.plan) query = query.where('plan', '=', input.plan);
      if (input.role) query = query.where('role', '=', input.role);
      const [rows, total] = await Promise.all([
        query.selectAll().orderBy('created_at', 'desc').orderBy('id').limit(input.limit).offset(input.offset).execute(),
        query.select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow(),
      ]);
      return { owners: rows.map(toOwnerDetail), count: rows.length, total: Number(total.n) };
    }),

  updateOwner: adminProcedure
    .meta({ openapi: { method: 'PATCH', path: '/api/v1/admin/owners/{id}', tags, summary: "Change an owner's plan or role", protect: true } })
    .input(updateOwnerInput)
    .output(z.object({ owner: ownerDetailSchema }))
    .mutation(async ({ ctx, input }) => {
      const row = isUuid(input.id)
        ? await ctx.deps.database.db
            .updateTable('owners')
            .set({ plan: input.plan, role: input.role, updated_at: new Date() })
            .where('id', '=', input.id)
            .returningAll()
            .executeTakeFirst()
        : undefined;
      if (!row) throw new AppError('NOT_FOUND', 'Owner not found');
      return { owner: toOwnerDetail(row) };
    }),
});
