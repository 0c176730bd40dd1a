import { z } from 'zod';
import { queryInput, queryResultSchema } from '../../schema/knowledge-base.ts';
import { type ErrorResponses, ownerProcedure, router } from '../trpc.ts';
import { runParserSelfTest } from '../../adapters/outbound/parsers/self-test.ts';
import { LOCAL_EMBEDDING_MODEL } from '../../adapters/outbound/embeddings/local-embedder.ts';
import * as repo from './repository.ts';
import { ownedConfig } from './configs-router.ts';
import { type AnswerEvent, answerQuery, streamAnswer } from './answer.ts';
import { recordQueryUsage } from '../billing/repository.ts';
import { kbQueryActivity } from '../dashboard/activity.ts';
import type { AiUsage } from '../../adapters/outbound/ai/core/response.ts';

const tags = ['Knowledge base'];

/** Meters a direct query (the plan's usage) and counts it in the owner's dashboard. */
async function countQuery(db: Parameters<typeof recordQueryUsage>[0], ownerId: string, query: string, answer: { usage: AiUsage; grounded: boolean }) {
  await recordQueryUsage(db, ownerId, answer.usage, kbQueryActivity(query, answer.grounded, answer.usage));
}

/** Counts a streamed answer once it is complete (a stream cut short answered nothing to count). */
async function* meteredStream(db: Parameters<typeof recordQueryUsage>[0], ownerId: string, query: string, events: AsyncIterable<AnswerEvent>) {
  for await (const event of events) {
    if (event.type !== 'complete') {
      yield event;
      continue;
    }
    await countQuery(db, ownerId, query, event);
    // Whether a source matched is the dashboard's business, not part of the documented event.
    const { grounded: _counted, ...complete } = event;
    yield complete;
  }
}
/** Every 502 code routers/ai-errors.ts gives an upstream's failure, under one text. */
const upstreamFailed = 'The embedding provider or language model could not be reached, failed, or answered in an invalid format (details: its reason)';
const kbQueryErrors = {
  NOT_FOUND: 'configId names none of your configurations',
  UPSTREAM_CONNECTION_FAILED: upstreamFailed,
  UPSTREAM_INVALID_RESPONSE: upstreamFailed,
  UPSTREAM_ERROR: upstreamFailed,
  UPSTREAM_TIMEOUT: 'The embedding provider or language model took longer than its timeout',
} satisfies ErrorResponses;

export const kbQueryRouter = router({
  query: ownerProcedure
    .meta({
      openapi: {
        method: 'POST',
        path: '/api/v1/knowledge-base/query',
        tags,
        summary: 'Ask a question; the answer cites its sources with scores and reports token usage',
        protect: true,
        errorResponses: kbQueryErrors,
      },
      rateLimit: 'kbQuery',
    })
    .input(queryInput)
    .output(queryResultSchema)
    .mutation(async ({ ctx, input }) => {
      const config = await ownedConfig(ctx.deps, ctx.owner.id, input.configId);
      const result = await answerQuery(ctx.deps, config, input.query, { signal: ctx.signal });
      await countQuery(ctx.deps.database.db, ctx.owner.id, input.query, result);
      return result;
    }),

  stream: ownerProcedure
    .meta({
      openapi: {
        method: 'POST',
        path: '/api/v1/knowledge-base/query/stream',
        tags,
        summary: 'Same as query, as Server-Sent Events',
        description:
          'Each event is a line `data: <json>`: first `{"type":"sources","sources":[...]}`, then `{"type":"delta","text":"..."}` events, ' +
          'then `{"type":"complete","answer":"...","sources":[...],"usage":{...}}`, then the literal `data: [DONE]`. ' +
          'An error after the stream started is sent as `{"type":"error","error":{message,code,details}}` before `[DONE]`. ' +
          'Errors before the first byte are normal JSON envelopes. Disconnecting cancels the work.',
        protect: true,
        errorResponses: kbQueryErrors,
      },
      rateLimit: 'kbQuery',
      sse: true,
    })
    .input(queryInput)
    .output(z.any().meta({ override: { type: 'string', description: 'text/event-stream' } }))
    .mutation(async ({ ctx, input }) => {
      const config = await ownedConfig(ctx.deps, ctx.owner.id, input.configId);
      return meteredStream(ctx.deps.database.db, ctx.owner.id, input.query, streamAnswer(ctx.deps, config, input.query, { signal: ctx.signal }));
    }),

  collections: ownerProcedure
    .meta({ openapi: { method: 'GET', path: '/api/v1/knowledge-base/collections', tags, summary: 'Vector collections: one per configuration', protect: true } })
    .input(z.object({}).optional())
    .output(
      z.object({
        collections: z.array(
          z.object({
            name: z.string(),
            configId: z.string(),
            configName: z.string(),
            vectorCount: z.number().int(),
            dimensions: z.number().int(),
            embeddingModel: z.string(),
            indexKind: z.enum(['exact-in-process']),
            servingVersion: z.number().int(),
            reembedding: z.boolean(),
          }),
        ),
        count: z.number().int(),
      }),
    )
    .query(async ({ ctx }) => {
      const db = ctx.deps.database.db;
      const configs = await repo.listConfigs(db, ctx.owner.id);
      const byConfig = configs.length ? await repo.countServingVectors(db, ctx.owner.id) : new Map<string, number>();
      const collections = configs.map((c) => ({
        name: `kb_${c.id.replace(/-/g, '')}_v${c.serving_version}`,
        configId: c.id,
        configName: c.name,
        vectorCount: byConfig.get(c.id) ?? 0,
        dimensions: c.embedding.dimensions,
        embeddingModel: c.embedding.model,
        indexKind: 'exact-in-process' as const,
        servingVersion: c.serving_version,
        reembedding: repo.reembedding(c),
      }));
      return { collections, count: collections.length };
    }),

  health: ownerProcedure
    .meta({
      openapi: {
        method: 'GET',
        path: '/api/v1/knowledge-base/health',
        tags,
        summary: 'Health of the knowledge-base services: database, vector search, providers, parser, job queue',
        protect: true,
      },
    })
    .input(z.object({}).optional())
    .output(
      z.object({
        status: z.enum(['ok', 'degraded']),
        database: z.object({ status: z.enum(['up', 'down']), kind: z.string(), latencyMs: z.number().nullable() }),
        vectorSearch: z.object({ mode: z.enum(['exact']), description: z.string() }),
        embedding: z.object({
          local: z.object({ model: z.string(), status: z.literal('ok') }),
          providers: z.array(z.object({ host: z.string(), model: z.string(), configs: z.number().int() })),
        }),
        languageModels: z.array(z.object({ host: z.string(), model: z.string(), configs: z.number().int() })),
        parser: z.object({
          status: z.enum(['ok', 'failing']),
          formats: z.array(z.object({ kind: z.string(), ok: z.boolean(), error: z.string().optional() })),
        }),
        queue: z.object({ queued: z.number().int(), running: z.number().int(), dead: z.number().int(), oldestQueuedAgeSeconds: z.number().nullable() }),
      }),
    )
    .query(async ({ ctx }) => {
      const { deps } = ctx;
      const t0 = performance.now();
      let database: { status: 'up' | 'down'; kind: string; latencyMs: number | null } = { status: 'up', kind: deps.database.kind, latencyMs: null };
      try {
        await deps.database.ping();
        database.latencyMs = Math.round((performance.now() - t0) * 100) / 100;
      } catch {
        database = { status: 'down', kind: deps.database.kind, latencyMs: null };
      }
      const configs = database.status === 'up' ? await repo.listConfigs(deps.database.db, ctx.owner.id) : [];
      const group = (items: Array<{ url?: string; model: string }>) => {
        const map = new Map<string, { host: string; model: string; configs: number }>();
        for (const item of items) {
          const host = item.url ? new URL(item.url).host : 'local';
          const key = `${host} ${item.model}`;
          map.set(key, { host, model: item.model, configs: (map.get(key)?.configs ?? 0) + 1 });
        }
        return [...map.values()];
      };
      const parser = await runParserSelfTest(ctx.deps.documentPool.extract);
      // The caller's own ingestion and re-embedding jobs: the whole queue's depth would tell one owner about others' work.
      const queue =
        database.status === 'up'
          ? await deps.jobs.stats({ field: 'configId', values: configs.map((c) => c.id) })
          : { queued: 0, running: 0, dead: 0, oldestQueuedAgeSeconds: null };
      const parserOk = parser.every((p) => p.ok);
      return {
        status: database.status === 'up' && parserOk ? ('ok' as const) : ('degraded' as const),
        database,
        vectorSearch: {
          mode: 'exact' as const,
          description: 'exact scoring of stored vectors in the service, held in memory per knowledge base',
        },
        embedding: {
          local: { model: LOCAL_EMBEDDING_MODEL, status: 'ok' as const },
          providers: group(configs.filter((c) => c.embedding.provider === 'openai').map((c) => ({ url: c.embedding.baseUrl, model: c.embedding.model }))),
        },
        languageModels: group(configs.filter((c) => c.llm).map((c) => ({ url: c.llm!.baseUrl, model: c.llm!.model }))),
        parser: {
          status: parserOk ? ('ok' as const) : ('failing' as const),
          formats: parser.map((p) => ({ kind: p.kind, ok: p.ok, ...(p.error ? { error: p.error } : {}) })),
        },
        queue,
      };
    }),

  testParser: ownerProcedure
    .meta({
      openapi: {
        method: 'POST',
        path: '/api/v1/knowledge-base/test-parser',
        tags,
        summary: 'Check the document-parser configuration: an external parsing service and its key, or the built-in parsers',
        protect: true,
      },
    })
    .input(
      z
        .object({
          serviceUrl: z
            .url({ protocol: /^https?$/ })
            .max(2048)
            .optional(),
          apiKey: z.string().min(1).max(4096).optional(),
        })
        .optional(),
    )
    .output(
      z.object({
        mode: z.enum(['external', 'built-in']),
        ok: z.boolean(),
        message: z.string(),
        external: z.object({ host: z.string(), status: z.number().int().nullable(), keyAccepted: z.boolean().nullable(), latencyMs: z.number() }).optional(),
        results: z
          .array(
            z.object({
              kind: z.string(),
              ok: z.boolean(),
              characters: z.number().int(),
              pages: z.number().int().nullable(),
              latencyMs: z.number(),
              error: z.string().optional(),
            }),
          )
          .optional(),
      }),
    )
    .mutation(async ({ ctx, input }) => {
      // The operator's key goes only to the operator's URL: an owner-supplied URL gets only the owner's key.
      const serviceUrl = input?.serviceUrl ?? ctx.deps.config.PARSER_SERVICE_URL;
      const apiKey = input?.serviceUrl ? input.apiKey : (input?.apiKey ?? ctx.deps.config.PARSER_SERVICE_KEY);
      if (!serviceUrl) {
        const results = await runParserSelfTest(ctx.deps.documentPool.extract);
        const ok = results.every((r) => r.ok);
        return { mode: 'built-in' as const, ok, message: ok ? 'The built-in PDF, DOCX, TXT and MD parsers work' : 'Some built-in parsers failed', results };
      }
      const host = new URL(serviceUrl).host;
      const t0 = performance.now();
      try {
        const res = await ctx.deps.http.request(serviceUrl, {
          method: 'GET',
          headers: apiKey ? { authorization: `Bearer ${apiKey}`, 'x-api-key': apiKey } : {},
          timeoutMs: 10_000,
          signal: ctx.signal,
        });
        const latencyMs = Math.round(performance.now() - t0);
        const keyAccepted = res.status === 401 || res.status === 403 ? false : res.status < 400 ? true : null;
        const ok = keyAccepted === true;
        const message =
          keyAccepted === false
            ? `The parsing service rejected the API key (HTTP ${res.status})`
            : ok
              ? 'The parsing service accepted the API key'
              : `The parsing service answered HTTP ${res.status}`;
        return { mode: 'external' as const, ok, message, external: { host, status: res.status, keyAccepted, latencyMs } };
      } catch (error) {
        return {
          mode: 'external' as const,
          ok: false,
          message: `The parsing service could not be reached: ${(error as Error).message}`,
          external: { host, status: null, keyAccepted: null, latencyMs: Math.round(performance.now() - t0) },
        };
      }
    }),
});
