import { z } from 'zod';
import { idParam, namesNothing } from '../../schema/common.ts';
import { AppError } from '../../schema/errors.ts';
import { accountStatusSchema } from '../../schema/toolhub.ts';
import type { Context } from '../context.ts';
import { findConfig } from '../knowledge-base/repository.ts';
import { ownerProcedure } from '../trpc.ts';
import { knownToolkit } from './accounts.ts';
import * as repo from './repository.ts';
import { modelToolNames } from './runner.ts';

/** Which connected-account tools each knowledge base's model may call. */

const tags = ['Tool integrations'];

const enabledToolSchema = z.object({
  configId: z.string(),
  accountId: z.string(),
  toolkit: z.string(),
  tool: z.string(),
  name: z.string().meta({ description: 'The name the model sees (numbered when two accounts of a toolkit are enabled)' }),
  accountStatus: accountStatusSchema,
});

/** The enabled-tools list as the API shows it, with the names the model is offered. */
function enabledTools(rows: Awaited<ReturnType<typeof repo.listEnabledTools>>) {
  const names = modelToolNames(rows);
  return rows.map((r, index) => ({
    configId: r.config_id,
    accountId: r.account_id,
    toolkit: r.toolkit,
    tool: r.tool,
    name: names[index]!,
    accountStatus: r.status,
  }));
}

async function ownedConfigId(ctx: Context & { owner: { id: string } }, id: string) {
  if (namesNothing(id) || !(await findConfig(ctx.deps.database.db, ctx.owner.id, id))) throw new AppError('NOT_FOUND', 'Knowledge base not found');
  return id;
}

export const enabledToolProcedures = {
  enabledTools: ownerProcedure
    .meta({
      openapi: {
        method: 'GET',
        path: '/api/v1/toolhub/enabled-tools',
        tags,
        summary: 'Which connected-account tools each knowledge base’s model may call (addition)',
        protect: true,
        errorResponses: { NOT_FOUND: 'configId names no knowledge base of yours' },
      },
    })
    .input(z.object({ configId: idParam.optional().meta({ description: 'Only this knowledge base' }) }))
    .output(z.object({ tools: z.array(enabledToolSchema) }))
    .query(async ({ ctx, input }) => {
      if (input.configId !== undefined) await ownedConfigId(ctx, input.configId);
      const rows = await repo.listEnabledTools(ctx.deps.database.db, ctx.owner.id, input.configId);
      return { tools: enabledTools(rows) };
    }),

  setEnabledTools: ownerProcedure
    .meta({
      openapi: {
        method: 'PUT',
        path: '/api/v1/toolhub/enabled-tools',
        tags,
        summary: 'Sets the connected-account tools a knowledge base’s model may call (addition); replaces the list',
        description: 'Offered in chat when the knowledge base has a language model; only ACTIVE accounts are offered.',
        protect: true,
        errorResponses: { NOT_FOUND: 'No knowledge base of yours has this id' },
      },
    })
    .input(
      z.object({
        configId: idParam,
        tools: z.array(z.object({ accountId: idParam, tool: z.string().min(1).max(100) })).max(50),
      }),
    )
    .output(z.object({ tools: z.array(enabledToolSchema) }))
    .mutation(async ({ ctx, input }) => {
      const db = ctx.deps.database.db;
      await ownedConfigId(ctx, input.configId);
      for (const [index, entry] of input.tools.entries()) {
        const account = namesNothing(entry.accountId) ? undefined : await repo.findAccount(db, ctx.owner.id, entry.accountId);
        if (!account) throw new AppError('VALIDATION_FAILED', 'Invalid request parameters', `tools.${index}.accountId: no account of yours has this id`);
        const toolkit = knownToolkit(account.toolkit);
        if (!toolkit.tools.some((t) => t.name === entry.tool)) {
          throw new AppError('VALIDATION_FAILED', 'Invalid request parameters', `tools.${index}.tool: ${toolkit.slug} has no tool ${entry.tool.slice(0, 100)}`);
        }
      }
      await db.transaction().execute((trx) => repo.replaceEnabledTools(trx, ctx.owner.id, input.configId, input.tools));
      const rows = await repo.listEnabledTools(db, ctx.owner.id, input.configId);
      return { tools: enabledTools(rows) };
    }),
};
