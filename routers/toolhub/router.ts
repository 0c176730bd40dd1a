import { z } from 'zod';
import { timestamp } from '../../schema/common.ts';
import { toolkitSchema } from '../../schema/toolhub.ts';
import type { Context } from '../context.ts';
import { ownerProcedure, router } from '../trpc.ts';
import { accountDebugProcedures, accountProcedures, connectProcedures } from './accounts-router.ts';
import { authConfigProcedures } from './auth-configs-router.ts';
import { enabledToolProcedures } from './enabled-tools-router.ts';
import { platformClient, providerUrls } from './oauth.ts';
import * as repo from './repository.ts';
import { TOOLKITS } from './toolkits/catalogue.ts';

const tags = ['Tool integrations'];
const STATUS_TTL_MS = 30_000;
const STATUS_TIMEOUT_MS = 3_000;

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

// The groups are spread in the order the API has always listed them (OpenAPI paths, GraphQL fields).
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

  ...authConfigProcedures,

  ...connectProcedures,

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

  ...accountProcedures,

  ...enabledToolProcedures,

  ...accountDebugProcedures,
});
