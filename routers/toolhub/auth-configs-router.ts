import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { deletedSchema, idParam, namesNothing } from '../../schema/common.ts';
import { AppError } from '../../schema/errors.ts';
import { authConfigInput, authConfigSchema, authConfigUpdateInput } from '../../schema/toolhub.ts';
import type { Context } from '../context.ts';
import { ownerProcedure } from '../trpc.ts';
import { knownToolkit } from './accounts.ts';
import { platformClient } from './oauth.ts';
import * as repo from './repository.ts';
import { PLATFORM_PREFIX } from './tokens.ts';
import { TOOLKITS } from './toolkits/catalogue.ts';

/** The OAuth client registrations: the owner's own, and the platform's shown beside them (client ids only). */

const tags = ['Tool integrations'];

const authConfigNotFound = () => new AppError('NOT_FOUND', 'Auth config not found');

function toAuthConfig(row: repo.AuthConfigRow) {
  return {
    id: row.id,
    toolkit: row.toolkit,
    name: row.name,
    source: 'owner' as const,
    clientId: row.client_id,
    scopes: Array.isArray(row.scopes) ? (row.scopes as string[]) : [],
    createdAt: row.created_at.toISOString(),
  };
}

function platformConfigs(ctx: Pick<Context, 'deps'>) {
  return TOOLKITS.flatMap((toolkit) => {
    const client = toolkit.auth.scheme === 'oauth2' ? platformClient(ctx.deps.config, toolkit.slug) : undefined;
    return client && toolkit.auth.scheme === 'oauth2'
      ? [
          {
            id: `${PLATFORM_PREFIX}${toolkit.slug}`,
            toolkit: toolkit.slug,
            name: `${toolkit.name} (platform)`,
            source: 'platform' as const,
            clientId: client.clientId,
            scopes: toolkit.auth.scopes,
            createdAt: null,
          },
        ]
      : [];
  });
}

export const authConfigProcedures = {
  authConfigs: ownerProcedure
    .meta({
      openapi: {
        method: 'GET',
        path: '/api/v1/toolhub/auth-configs',
        tags,
        summary: 'Your OAuth client registrations and the platform’s (client ids only, never secrets)',
        protect: true,
      },
    })
    .input(z.object({}).optional())
    .output(z.object({ authConfigs: z.array(authConfigSchema) }))
    .query(async ({ ctx }) => ({
      authConfigs: [...platformConfigs(ctx), ...(await repo.listAuthConfigs(ctx.deps.database.db, ctx.owner.id)).map(toAuthConfig)],
    })),

  createAuthConfig: ownerProcedure
    .meta({
      openapi: {
        method: 'POST',
        path: '/api/v1/toolhub/auth-configs',
        tags,
        summary: 'Registers your OAuth client for a toolkit (addition); the secret is stored sealed and never shown again',
        protect: true,
      },
      successStatus: 201,
    })
    .input(authConfigInput)
    .output(z.object({ authConfig: authConfigSchema }))
    .mutation(async ({ ctx, input }) => {
      const toolkit = knownToolkit(input.toolkit);
      if (toolkit.auth.scheme !== 'oauth2')
        throw new AppError('VALIDATION_FAILED', 'Invalid request parameters', `toolkit: ${toolkit.slug} does not use OAuth`);
      const row = await repo.insertAuthConfig(ctx.deps.database.db, {
        id: randomUUID(),
        owner_id: ctx.owner.id,
        toolkit: toolkit.slug,
        name: input.name ?? toolkit.name,
        client_id: input.clientId,
        client_secret_enc: ctx.deps.secrets.seal(input.clientSecret),
        scopes: input.scopes ?? toolkit.auth.scopes,
      });
      return { authConfig: toAuthConfig(row) };
    }),

  updateAuthConfig: ownerProcedure
    .meta({
      openapi: {
        method: 'PATCH',
        path: '/api/v1/toolhub/auth-configs/{id}',
        tags,
        summary: 'Changes your OAuth client registration (addition)',
        protect: true,
      },
    })
    .input(authConfigUpdateInput)
    .output(z.object({ authConfig: authConfigSchema }))
    .mutation(async ({ ctx, input }) => {
      if (namesNothing(input.id)) throw authConfigNotFound();
      const row = await repo.updateAuthConfig(ctx.deps.database.db, ctx.owner.id, input.id, {
        ...(input.name ? { name: input.name } : {}),
        ...(input.clientId ? { client_id: input.clientId } : {}),
        ...(input.clientSecret ? { client_secret_enc: ctx.deps.secrets.seal(input.clientSecret) } : {}),
        ...(input.scopes ? { scopes: input.scopes } : {}),
      });
      if (!row) throw authConfigNotFound();
      return { authConfig: toAuthConfig(row) };
    }),

  deleteAuthConfig: ownerProcedure
    .meta({
      openapi: {
        method: 'DELETE',
        path: '/api/v1/toolhub/auth-configs/{id}',
        tags,
        summary: 'Deletes your OAuth client registration (addition); its accounts expire at their next refresh',
        protect: true,
      },
    })
    .input(z.object({ id: idParam }))
    .output(deletedSchema)
    .mutation(async ({ ctx, input }) => {
      const deleted = namesNothing(input.id) ? undefined : await repo.deleteAuthConfig(ctx.deps.database.db, ctx.owner.id, input.id);
      if (!deleted || Number(deleted.numDeletedRows) === 0) throw authConfigNotFound();
      return { deleted: true as const, id: input.id };
    }),
};
