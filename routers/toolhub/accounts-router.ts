import { z } from 'zod';
import { idParam, namesNothing, timestamp } from '../../schema/common.ts';
import { AppError } from '../../schema/errors.ts';
import { accountSchema, accountStatusSchema, connectInput, connectOutput } from '../../schema/toolhub.ts';
import type { Context } from '../context.ts';
import { ownerProcedure, publicProcedure } from '../trpc.ts';
import { activate, completeAuthorization, connect, knownToolkit, toAccount } from './accounts.ts';
import * as repo from './repository.ts';

/** Connected accounts: connecting one (OAuth 2 or an API key), the provider's callback, and managing them. */

const tags = ['Tool integrations'];
const CALLBACK_PATH = '/api/v1/toolhub/oauth/callback';

const accountNotFound = () => new AppError('NOT_FOUND', 'Account not found');

const redirectUriOf = (ctx: Pick<Context, 'deps' | 'host'>) => {
  const origin = ctx.deps.config.PUBLIC_ORIGINS[0] ?? (ctx.host ? `https://${ctx.host}` : null);
  return origin ? `${origin}${CALLBACK_PATH}` : null;
};

async function ownedAccount(ctx: Context & { owner: { id: string } }, id: string) {
  const row = namesNothing(id) ? undefined : await repo.findAccount(ctx.deps.database.db, ctx.owner.id, id);
  if (!row) throw accountNotFound();
  return row;
}

export const connectProcedures = {
  connect: ownerProcedure
    .meta({
      openapi: {
        method: 'POST',
        path: '/api/v1/toolhub/connect',
        tags,
        summary: 'Connects an account: OAuth 2 returns the authorization URL (PKCE S256, single-use state, 10 min); an API key is tested, then stored',
        protect: true,
        errorResponses: { NOT_FOUND: 'No auth config of yours has this id' },
      },
      successStatus: 201,
    })
    .input(connectInput)
    .output(connectOutput)
    .mutation(async ({ ctx, input }) =>
      connect(ctx.deps, {
        ownerId: ctx.owner.id,
        toolkit: knownToolkit(input.toolkit),
        authConfigId: input.authConfigId,
        apiKey: input.apiKey,
        label: input.label,
        settings: input.settings ?? {},
        scopes: input.scopes,
        redirectUri: redirectUriOf(ctx),
      }),
    ),

  callback: publicProcedure
    .meta({
      openapi: {
        method: 'GET',
        path: CALLBACK_PATH,
        tags,
        summary: 'Where the provider returns the owner (addition): exchanges the code and activates the account',
        description:
          'The state is single-use and expires 10 minutes after connect. A provider error or a refused exchange leaves the account FAILED with the reason.',
      },
    })
    .input(
      z.object({
        state: z.string().min(1).max(200),
        code: z.string().min(1).max(2000).optional(),
        error: z.string().max(200).optional(),
        error_description: z.string().max(1000).optional(),
      }),
    )
    .output(z.object({ account: accountSchema }))
    .query(async ({ ctx, input }) => completeAuthorization(ctx.deps, input)),
};

export const accountProcedures = {
  accounts: ownerProcedure
    .meta({ openapi: { method: 'GET', path: '/api/v1/toolhub/accounts', tags, summary: 'Your connected accounts, oldest first', protect: true } })
    .input(z.object({ toolkit: z.string().max(50).optional(), status: accountStatusSchema.optional() }))
    .output(z.object({ accounts: z.array(accountSchema) }))
    .query(async ({ ctx, input }) => ({
      accounts: (await repo.listAccounts(ctx.deps.database.db, ctx.owner.id))
        .filter((a) => (!input.toolkit || a.toolkit === input.toolkit) && (!input.status || a.status === input.status))
        .map(toAccount),
    })),

  account: ownerProcedure
    .meta({ openapi: { method: 'GET', path: '/api/v1/toolhub/accounts/{accountId}', tags, summary: 'One connected account', protect: true } })
    .input(z.object({ accountId: idParam }))
    .output(z.object({ account: accountSchema }))
    .query(async ({ ctx, input }) => ({ account: toAccount(await ownedAccount(ctx, input.accountId)) })),

  activate: ownerProcedure
    .meta({
      openapi: {
        method: 'POST',
        path: '/api/v1/toolhub/accounts/{accountId}/activate',
        tags,
        summary: 'Re-checks the credential with a test call, then makes the account ACTIVE',
        protect: true,
        errorResponses: {
          CONFLICT:
            'The authorization is not finished, the credential check failed, or the token could not be refreshed and the account expired (the reason says why)',
          UPSTREAM_ERROR: 'The provider refused or failed the token refresh (code UPSTREAM_ERROR)',
          UPSTREAM_TIMEOUT: 'Another refresh of this account did not finish in time (code UPSTREAM_TIMEOUT)',
        },
      },
    })
    .input(z.object({ accountId: idParam }))
    .output(z.object({ account: accountSchema }))
    .mutation(async ({ ctx, input }) => ({ account: await activate(ctx.deps, await ownedAccount(ctx, input.accountId)) })),

  disable: ownerProcedure
    .meta({
      openapi: {
        method: 'POST',
        path: '/api/v1/toolhub/accounts/{accountId}/disable',
        tags,
        summary: 'Stops the account being used (idempotent); its credential is kept for activate',
        protect: true,
      },
    })
    .input(z.object({ accountId: idParam }))
    .output(z.object({ account: accountSchema }))
    .mutation(async ({ ctx, input }) => {
      const account = await ownedAccount(ctx, input.accountId);
      if (account.status === 'DISABLED') return { account: toAccount(account) };
      const row = await repo.updateAccount(ctx.deps.database.db, account.id, { status: 'DISABLED', status_reason: 'Disabled by the owner' });
      return { account: toAccount(row!) };
    }),
};

export const accountDebugProcedures = {
  debugAccounts: ownerProcedure
    .meta({
      openapi: {
        method: 'GET',
        path: '/api/v1/toolhub/debug-accounts',
        tags,
        summary: 'Per account: scopes, token expiry, last refresh, last error, last use (tokens never shown)',
        protect: true,
      },
    })
    .input(z.object({}).optional())
    .output(
      z.object({
        accounts: z.array(
          z.object({
            id: z.string(),
            toolkit: z.string(),
            status: accountStatusSchema,
            scopes: z.array(z.string()),
            hasAccessToken: z.boolean(),
            hasRefreshToken: z.boolean(),
            tokenExpiresAt: timestamp.nullable(),
            lastRefreshAt: timestamp.nullable(),
            lastError: z.string().nullable(),
            lastUsedAt: timestamp.nullable(),
            refreshInProgress: z.boolean(),
          }),
        ),
      }),
    )
    .query(async ({ ctx }) => ({
      accounts: (await repo.listAccounts(ctx.deps.database.db, ctx.owner.id)).map((a) => ({
        id: a.id,
        toolkit: a.toolkit,
        status: a.status,
        scopes: Array.isArray(a.scopes) ? (a.scopes as string[]) : [],
        hasAccessToken: a.access_token_enc !== null,
        hasRefreshToken: a.refresh_token_enc !== null,
        tokenExpiresAt: a.token_expires_at?.toISOString() ?? null,
        lastRefreshAt: a.last_refresh_at?.toISOString() ?? null,
        lastError: a.last_error,
        lastUsedAt: a.last_used_at?.toISOString() ?? null,
        refreshInProgress: a.refresh_lease_until !== null && a.refresh_lease_until.getTime() > Date.now(),
      })),
    })),
};
