import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { AppError } from '../../schema/errors.ts';
import { deletedSchema, idParam, isUuid } from '../../schema/common.ts';
import { webhookEvent, withEvents } from '../webhooks/outbox.ts';
import { createKbConfigInput, kbConfigSchema, updateKbConfigInput, embeddingInputSchema } from '../../schema/knowledge-base.ts';
import type { EmbeddingSettings, LlmSettings } from '../../db/types.ts';
import type { AppDeps } from '../context.ts';
import { ownerProcedure, router } from '../trpc.ts';
import { LOCAL_EMBEDDING_MODEL } from '../../adapters/embeddings/local-embedder.ts';
import * as repo from './repository.ts';
import { jsonb } from '../../db/json.ts';
import { normaliseTools, toolSettingInput, TOOL_REGISTRY } from './tools-registry.ts';
import { REEMBED_JOB } from './jobs.ts';

const tags = ['Knowledge base'];
export const configNotFound = () => new AppError('NOT_FOUND', 'Knowledge base configuration not found');
const DEFAULT_LOCAL_DIMENSIONS = 384;

async function checkProviderUrl(deps: AppDeps, field: string, url: string | undefined) {
  if (!url) return;
  try {
    await deps.http.assertAllowed(url);
  } catch (error) {
    throw new AppError('VALIDATION_FAILED', `${field} is not allowed`, `${field}: ${(error as Error).message}`);
  }
}

function embeddingSettings(input: z.infer<typeof embeddingInputSchema>): EmbeddingSettings {
  if (input.provider === 'local') return { provider: 'local', model: LOCAL_EMBEDDING_MODEL, dimensions: input.dimensions ?? DEFAULT_LOCAL_DIMENSIONS };
  // dimensions 0 = learned from the provider's first answer.
  return { provider: 'openai', model: input.model, baseUrl: input.baseUrl, dimensions: input.dimensions ?? 0 };
}

const sameEmbedding = (a: EmbeddingSettings, b: EmbeddingSettings) =>
  a.provider === b.provider && a.model === b.model && (a.baseUrl ?? null) === (b.baseUrl ?? null) && (b.dimensions === 0 || a.dimensions === b.dimensions);

export async function ownedConfig(deps: AppDeps, ownerId: string, id: string) {
  const row = isUuid(id) ? await repo.findConfig(deps.database.db, ownerId, id) : undefined;
  if (!row) throw configNotFound();
  return row;
}

export const kbConfigsRouter = router({
  list: ownerProcedure
    .meta({ openapi: { method: 'GET', path: '/api/v1/knowledge-base/configs', tags, summary: 'List knowledge base configurations', protect: true } })
    .input(z.object({}).optional())
    .output(z.object({ configs: z.array(kbConfigSchema), count: z.number().int() }))
    .query(async ({ ctx }) => {
      const rows = await repo.listConfigs(ctx.deps.database.db, ctx.owner.id);
      return { configs: rows.map(repo.toKbConfig), count: rows.length };
    }),

  create: ownerProcedure
    .meta({ openapi: { method: 'POST', path: '/api/v1/knowledge-base/configs', tags, summary: 'Create a knowledge base configuration', protect: true }, successStatus: 201 })
    .input(createKbConfigInput)
    .output(z.object({ config: kbConfigSchema }))
    .mutation(async ({ ctx, input }) => {
      const embedding = input.embedding ?? { provider: 'local' as const };
      await checkProviderUrl(ctx.deps, 'embedding.baseUrl', embedding.provider === 'openai' ? embedding.baseUrl : undefined);
      await checkProviderUrl(ctx.deps, 'llm.baseUrl', input.llm?.baseUrl);
      const { secrets } = ctx.deps;
      const row = await withEvents(
        ctx.deps,
        (trx) =>
          trx
        .insertInto('kb_configs')
        .values({
          id: randomUUID(),
          owner_id: ctx.owner.id,
          name: input.name ?? 'Knowledge base',
          temperature: input.temperature ?? 0.7,
          max_tokens: input.maxTokens ?? 1024,
          chunk_size: input.chunkSize ?? 1000,
          chunk_overlap: input.chunkOverlap ?? Math.min(150, Math.floor(((input.chunkSize ?? 1000) - 1) / 2)),
          retrieval_depth: input.retrievalDepth ?? 5,
          language: input.language ?? 'en',
          system_prompt: input.systemPrompt ?? null,
          embedding: jsonb(embeddingSettings(embedding)),
          embedding_api_key_enc: embedding.provider === 'openai' && embedding.apiKey ? secrets.seal(embedding.apiKey) : null,
          serving_embedding: jsonb(embeddingSettings(embedding)),
          serving_embedding_api_key_enc: embedding.provider === 'openai' && embedding.apiKey ? secrets.seal(embedding.apiKey) : null,
          llm: input.llm ? jsonb<LlmSettings>({ provider: 'openai', model: input.llm.model, baseUrl: input.llm.baseUrl }) : null,
          llm_api_key_enc: input.llm?.apiKey ? secrets.seal(input.llm.apiKey) : null,
          memory_enabled: input.memory?.enabled ?? true,
          memory_max_messages: input.memory?.maxMessages ?? 10,
          tools: jsonb([]),
        })
        .returningAll()
        .executeTakeFirstOrThrow(),
        (created) => [webhookEvent(ctx.owner.id, 'knowledge_base.created', repo.toKbConfig(created))],
      );
      return { config: repo.toKbConfig(row) };
    }),

  get: ownerProcedure
    .meta({ openapi: { method: 'GET', path: '/api/v1/knowledge-base/configs/{id}', tags, summary: 'One knowledge base configuration', protect: true } })
    .input(z.object({ id: idParam }))
    .output(z.object({ config: kbConfigSchema }))
    .query(async ({ ctx, input }) => ({ config: repo.toKbConfig(await ownedConfig(ctx.deps, ctx.owner.id, input.id)) })),

  update: ownerProcedure
    .meta({ openapi: { method: 'PATCH', path: '/api/v1/knowledge-base/configs/{id}', tags, summary: 'Change fields of a configuration (a new embedding model re-embeds in the background)', protect: true } })
    .input(updateKbConfigInput)
    .output(z.object({ config: kbConfigSchema }))
    .mutation(async ({ ctx, input }) => {
      const current = await ownedConfig(ctx.deps, ctx.owner.id, input.id);
      const chunkSize = input.chunkSize ?? current.chunk_size;
      const chunkOverlap = input.chunkOverlap ?? current.chunk_overlap;
      if (chunkOverlap >= chunkSize / 2) throw new AppError('VALIDATION_FAILED', 'Invalid request parameters', 'chunkOverlap: must be less than half of chunkSize');
      await checkProviderUrl(ctx.deps, 'embedding.baseUrl', input.embedding?.provider === 'openai' ? input.embedding.baseUrl : undefined);
      await checkProviderUrl(ctx.deps, 'llm.baseUrl', input.llm?.baseUrl);
      const { secrets } = ctx.deps;
      const nextEmbedding = input.embedding ? embeddingSettings(input.embedding) : undefined;
      const embeddingChanged = nextEmbedding !== undefined && !sameEmbedding(current.embedding, nextEmbedding);
      // A stored provider key follows its host: a new host without a new key gets no key.
      const sameHost = (a?: string | null, b?: string | null) => !!a && !!b && new URL(a).origin === new URL(b).origin;
      const nextEmbeddingKey =
        input.embedding?.provider !== 'openai'
          ? null
          : input.embedding.apiKey
            ? secrets.seal(input.embedding.apiKey)
            : sameHost(current.embedding.baseUrl, input.embedding.baseUrl)
              ? current.embedding_api_key_enc
              : null;
      const nextLlmKey = !input.llm ? null : input.llm.apiKey ? secrets.seal(input.llm.apiKey) : sameHost(current.llm?.baseUrl, input.llm.baseUrl) ? current.llm_api_key_enc : null;
      const row = await withEvents(ctx.deps, async (trx) => {
        const updated = await trx
          .updateTable('kb_configs')
          .set((eb) => ({
            name: input.name,
            temperature: input.temperature,
            max_tokens: input.maxTokens,
            chunk_size: input.chunkSize,
            chunk_overlap: input.chunkOverlap,
            retrieval_depth: input.retrievalDepth,
            language: input.language,
            system_prompt: input.systemPrompt,
            memory_enabled: input.memory?.enabled,
            memory_max_messages: input.memory?.maxMessages,
            ...(input.embedding
              ? {
                  embedding: jsonb(nextEmbedding!),
                  embedding_api_key_enc: nextEmbeddingKey,
                  // Same model, new key: the serving side uses it too. A new model waits for the switch.
                  ...(embeddingChanged ? {} : { serving_embedding_api_key_enc: nextEmbeddingKey }),
                }
              : {}),
            ...(embeddingChanged ? { embedding_version: eb('embedding_version', '+', 1) } : {}),
            ...(input.llm !== undefined
              ? {
                  llm: input.llm ? jsonb<LlmSettings>({ provider: 'openai', model: input.llm.model, baseUrl: input.llm.baseUrl }) : null,
                  llm_api_key_enc: nextLlmKey,
                }
              : {}),
            updated_at: new Date(),
          }))
          .where('id', '=', current.id)
          .returningAll()
          .executeTakeFirstOrThrow();
        if (embeddingChanged) {
          // The old vectors keep serving until the re-embedding job switches serving_version.
          await ctx.deps.jobs.enqueue(REEMBED_JOB, { configId: updated.id, version: updated.embedding_version }, { dedupeKey: `reembed:${updated.id}:${updated.embedding_version}` }, trx);
        }
        return updated;
      }, (updated) => [webhookEvent(ctx.owner.id, 'knowledge_base.updated', repo.toKbConfig(updated))]);
      if (embeddingChanged) ctx.deps.jobs.notify();
      return { config: repo.toKbConfig(row) };
    }),

  delete: ownerProcedure
    .meta({ openapi: { method: 'DELETE', path: '/api/v1/knowledge-base/configs/{id}', tags, summary: 'Delete a configuration with its documents, chunks, vectors, stored files and pending jobs', protect: true } })
    .input(z.object({ id: idParam }))
    .output(deletedSchema)
    .mutation(async ({ ctx, input }) => {
      const config = await ownedConfig(ctx.deps, ctx.owner.id, input.id);
      await withEvents(
        ctx.deps,
        async (trx) => {
          const documentIds = (await trx.selectFrom('kb_documents').select('id').where('config_id', '=', config.id).execute()).map((d) => d.id);
          await repo.deleteJobsFor(trx, 'documentId', documentIds);
          await repo.deleteJobsFor(trx, 'configId', [config.id]);
          await trx.deleteFrom('kb_configs').where('id', '=', config.id).execute();
        },
        () => [webhookEvent(ctx.owner.id, 'knowledge_base.deleted', { id: config.id })],
      );
      await ctx.deps.blobs.deletePrefix(config.id);
      return { deleted: true as const, id: config.id };
    }),

  tools: ownerProcedure
    .meta({ openapi: { method: 'GET', path: '/api/v1/knowledge-base/configs/{id}/tools', tags, summary: 'Tools the assistant may call, and the registry of available tools', protect: true } })
    .input(z.object({ id: idParam }))
    .output(
      z.object({
        tools: kbConfigSchema.shape.tools,
        available: z.array(z.object({ name: z.string(), description: z.string() })),
      }),
    )
    .query(async ({ ctx, input }) => {
      const config = await ownedConfig(ctx.deps, ctx.owner.id, input.id);
      return {
        tools: repo.toKbConfig(config).tools,
        available: Object.entries(TOOL_REGISTRY).map(([name, tool]) => ({ name, description: tool.description })),
      };
    }),

  updateTools: ownerProcedure
    .meta({ openapi: { method: 'PATCH', path: '/api/v1/knowledge-base/configs/{id}/tools', tags, summary: 'Replace the tools of a knowledge base (validated against the tool registry)', protect: true } })
    .input(z.object({ id: idParam, tools: z.array(toolSettingInput).max(20) }))
    .output(z.object({ tools: kbConfigSchema.shape.tools }))
    .mutation(async ({ ctx, input }) => {
      const config = await ownedConfig(ctx.deps, ctx.owner.id, input.id);
      const normalised = normaliseTools(input.tools);
      if (!normalised.ok) throw new AppError('VALIDATION_FAILED', 'Invalid request parameters', normalised.details);
      const row = await withEvents(
        ctx.deps,
        (trx) => trx.updateTable('kb_configs').set({ tools: jsonb(normalised.tools), updated_at: new Date() }).where('id', '=', config.id).returningAll().executeTakeFirstOrThrow(),
        (updated) => [webhookEvent(ctx.owner.id, 'knowledge_base.updated', repo.toKbConfig(updated))],
      );
      return { tools: repo.toKbConfig(row).tools };
    }),

  memory: ownerProcedure
    .meta({ openapi: { method: 'GET', path: '/api/v1/knowledge-base/configs/{id}/memory', tags, summary: 'Conversation-memory settings (set through the configuration PATCH: memory.enabled, memory.maxMessages)', protect: true } })
    .input(z.object({ id: idParam }))
    .output(z.object({ memory: kbConfigSchema.shape.memory, configId: z.string() }))
    .query(async ({ ctx, input }) => {
      const config = await ownedConfig(ctx.deps, ctx.owner.id, input.id);
      return { configId: config.id, memory: { enabled: config.memory_enabled, maxMessages: config.memory_max_messages } };
    }),
});
