import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { deletedSchema, idParam, namesNothing, timestamp } from '../../schema/common.ts';
import { AppError } from '../../schema/errors.ts';
import {
  accountSchema,
  accountStatusSchema,
  authConfigInput,
  authConfigSchema,
  authConfigUpdateInput,
  connectInput,
  connectOutput,
  toolkitSchema,
} from '../../schema/toolhub.ts';
import type { Context } from '../context.ts';
import { ownerProcedure, publicProcedure, router } from '../trpc.ts';
import { activate, completeAuthorization, connect, knownToolkit, toAccount } from './accounts.ts';
import { platformClient, providerUrls } from './oauth.ts';
import * as repo from './repository.ts';
import { modelToolNames } from './runner.ts';
import { findConfig } from '../knowledge-base/repository.ts';
import { PLATFORM_PREFIX } from './tokens.ts';
import { TOOLKITS } from './toolkits/catalogue.ts';

const tags = ['Tool integrations'];
const CALLBACK_PATH = '/api/v1/toolhub/oauth/callback';
const STATUS_TTL_MS = 30_000;
const STATUS_TIMEOUT_MS = 3_000;

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

const accountNotFound = () => new AppError('NOT_FOUND', 'Account not found');
const authConfigNotFound = () => new AppError('NOT_FOUND', 'Auth config not found');

const redirectUriOf = (ctx: Pick<Context, 'deps' | 'host'>) => {
  const origin = ctx.deps.config.PUBLIC_ORIGINS[0] ?? (ctx.host ? `https://${ctx.host}` : null);
  return origin ? `${origin}${CALLBACK_PATH}` : null;
};

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

const catalogue = () =>
  TOOLKITS.map((toolkit) => ({
    slug: toolkit.slug,
    name: toolkit.name,
    description: toolkit.description,
    authScheme: toolkit.auth.scheme,
    scopes: toolkit.auth.scheme === 'oauth2' ? toolkit.auth.scopes : [],
    settingsSchema: toolkit.settingsSchema,
    tools: toolkit.tools.map((tool) => ({ name: `${toolkit.slug}__${tool.name}`, description: tool.description, inputSchema: tool.inputSchema })),
  }));

async function ownedAccount(ctx: Context & { owner: { id: string } }, id: string) {
  const row = namesNothing(id) ? undefined : await repo.findAccount(ctx.deps.database.db, ctx.owner.id, id);
  if (!row) throw accountNotFound();
  return row;
}

async function ownedConfigId(ctx: Context & { owner: { id: string } }, id: string) {
  if (namesNothing(id) || !(await findConfig(ctx.deps.database.db, ctx.owner.id, id))) throw new AppError('NOT_FOUND', 'Knowledge base not found');
  return id;
}

const statusSchema = z.object({
  slug: z.string(),
  url: z.string().nullable(),
  reachable: z.boolean().nullable().meta({ description: 'null when the toolkit has no fixed provider (the generic HTTP tool)' }),
  httpStatus: z.number().int().nullable(),
  latencyMs: z.number().int().nullable(),
  error: z.string().nullable(),
});
type ProviderStatus = z.infer<typeof statusSchema>;
/** Per instance (its deps), so two services in one process never share an answer made with another's settings. */
const statusCaches = new WeakMap<object, { at: number; value: Promise<ProviderStatus[]> }>();

async function providerStatuses(ctx: Pick<Context, 'deps'>): Promise<ProviderStatus[]> {
  return Promise.all(
    TOOLKITS.map(async (toolkit): Promise<ProviderStatus> => {
      const base = providerUrls(ctx.deps.config, toolkit).apiBaseUrl;
      if (!base) return { slug: toolkit.slug, url: null, reachable: null, httpStatus: null, latencyMs: null, error: null };
      const url = toolkit.statusUrl(base);
      const started = Date.now();
      try {
        const response = await ctx.deps.http.request(url, { timeoutMs: STATUS_TIMEOUT_MS, maxResponseBytes: 64 * 1024 });
        return { slug: toolkit.slug, url, reachable: response.status < 500, httpStatus: response.status, latencyMs: Date.now() - started, error: null };
      } catch (error) {
        return {
          slug: toolkit.slug,
          url,
          reachable: false,
          httpStatus: null,
          latencyMs: null,
          error: error instanceof Error ? error.message.slice(0, 200) : 'failed',
        };
      }
    }),
  );
}

export const toolhubRouter = router({
  tools: ownerProcedure
    .meta({
      openapi: {
        method: 'GET',
        path: '/api/v1/toolhub/tools',
        tags,
        summary: 'The catalogue: toolkits, their auth scheme and tools with input schemas',
        protect: true,
      },
    })
    .input(z.object({}).optional())
    .output(z.object({ toolkits: z.array(toolkitSchema) }))
    .query(() => ({ toolkits: catalogue() })),

  config: ownerProcedure
    .meta({
      openapi: {
        method: 'GET',
        path: '/api/v1/toolhub/config',
        tags,
        summary: 'Per toolkit: your auth configs and accounts by status (never a secret)',
        protect: true,
      },
    })
    .input(z.object({}).optional())
    .output(
      z.object({
        toolkits: z.array(
          z.object({
            slug: z.string(),
            authScheme: z.enum(['oauth2', 'api_key', 'none']),
            platformClient: z.boolean(),
            authConfigIds: z.array(z.string()),
            accounts: z.record(z.string(), z.number().int()).meta({ description: 'Account count by status' }),
            enabledTools: z
              .array(z.object({ configId: z.string(), accountId: z.string(), tool: z.string() }))
              .meta({ description: 'The tools of this toolkit your knowledge bases may call' }),
          }),
        ),
      }),
    )
    .query(async ({ ctx }) => {
      const db = ctx.deps.database.db;
      const [configs, accounts, enabled] = await Promise.all([
        repo.listAuthConfigs(db, ctx.owner.id),
        repo.listAccounts(db, ctx.owner.id),
        repo.listEnabledTools(db, ctx.owner.id),
      ]);
      return {
        toolkits: TOOLKITS.map((toolkit) => {
          const counts: Record<string, number> = {};
          for (const account of accounts.filter((a) => a.toolkit === toolkit.slug)) counts[account.status] = (counts[account.status] ?? 0) + 1;
          return {
            slug: toolkit.slug,
            authScheme: toolkit.auth.scheme,
            platformClient: toolkit.auth.scheme === 'oauth2' && platformClient(ctx.deps.config, toolkit.slug) !== undefined,
            authConfigIds: configs.filter((c) => c.toolkit === toolkit.slug).map((c) => c.id),
            accounts: counts,
            enabledTools: enabled.filter((e) => e.toolkit === toolkit.slug).map((e) => ({ configId: e.config_id, accountId: e.account_id, tool: e.tool })),
          };
        }),
      };
    }),

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

  status: ownerProcedure
    .meta({
      openapi: {
        method: 'GET',
        path: '/api/v1/toolhub/status',
        tags,
        summary: 'Whether each toolkit’s provider answers (checked at most every 30 s per instance)',
        protect: true,
      },
    })
    .input(z.object({}).optional())
    .output(z.object({ providers: z.array(statusSchema), checkedAt: timestamp }))
    .query(async ({ ctx }) => {
      let cached = statusCaches.get(ctx.deps);
      if (!cached || Date.now() - cached.at > STATUS_TTL_MS) {
        cached = { at: Date.now(), value: providerStatuses(ctx) };
        statusCaches.set(ctx.deps, cached);
      }
      return { providers: await cached.value, checkedAt: new Date(cached.at).toISOString() };
    }),

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
});
