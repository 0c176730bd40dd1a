import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { AppError } from '../../schema/errors.ts';
import { deletedSchema, idParam, saveWarningsSchema } from '../../schema/common.ts';
import { webhookEvent, withEvents } from '../webhooks/outbox.ts';
import { createKbConfigInput, kbConfigSchema, updateKbConfigInput, type embeddingInputSchema } from '../../schema/knowledge-base.ts';
import type { EmbeddingSettings, LlmSettings } from '../../db/types.ts';
import type { AppDeps } from '../context.ts';
import { ownerProcedure, router } from '../trpc.ts';
import { LOCAL_EMBEDDING_MODEL } from '../../adapters/outbound/embeddings/local-embedder.ts';
import * as repo from './repository.ts';
import { detachConfig } from '../chat-interfaces/repository.ts';
import { toChatInterface } from '../chat-interfaces/view.ts';
import { normaliseTools, toolSettingInput, TOOL_REGISTRY } from './tools-registry.ts';
import { queueReembedding } from './jobs.ts';
import { checkAddressAtSave, withWarnings } from '../address-at-save.ts';

const tags = ['Knowledge base'];
export const configNotFound = () => new AppError('NOT_FOUND', 'Knowledge base configuration not found');
const DEFAULT_LOCAL_DIMENSIONS = 384;

/** A provider URL into a private network is refused at save time; a name that does not resolve yet is saved with a warning. */
async function checkProviderUrl(deps: Pick<AppDeps, 'http'>, field: string, url: string | undefined): Promise<string | undefined> {
  if (!url) return undefined;
  const checked = await checkAddressAtSave(deps.http, field, url);
  if (checked.refused !== undefined) throw new AppError('VALIDATION_FAILED', `${field} is not allowed`, `${field}: ${checked.refused}`);
  return checked.warning;
}

function embeddingSettings(input: z.infer<typeof embeddingInputSchema>): EmbeddingSettings {
  if (input.provider === 'local') return { provider: 'local', model: LOCAL_EMBEDDING_MODEL, dimensions: input.dimensions ?? DEFAULT_LOCAL_DIMENSIONS };
  // dimensions 0 = learned from the provider's first answer.
  return { provider: 'openai', model: input.model, baseUrl: input.baseUrl, dimensions: input.dimensions ?? 0 };
}

const sameEmbedding = (a: EmbeddingSettings, b: EmbeddingSettings) =>
  a.provider === b.provider && a.model === b.model && (a.baseUrl ?? null) === (b.baseUrl ?? null) && (b.dimensions === 0 || a.dimensions === b.dimensions);

export async function ownedConfig(deps: Pick<AppDeps, 'database'>, ownerId: string, id: string) {
  const row = await repo.findConfig(deps.database.db, ownerId, id);
  if (!row) throw configNotFound();
  return row;
}

/** As ownedConfig, for a caller that needs only to know the configuration is the owner's. */
export async function ownedConfigId(deps: Pick<AppDeps, 'database'>, ownerId: string, id: string): Promise<string> {
  const found = await repo.findOwnedConfigId(deps.database.db, ownerId, id);
  if (!found) throw configNotFound();
  return found;
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
    .meta({
      openapi: { method: 'POST', path: '/api/v1/knowledge-base/configs', tags, summary: 'Create a knowledge base configuration', protect: true },
      successStatus: 201,
    })
    .input(createKbConfigInput)
    .output(z.object({ config: kbConfigSchema, warnings: saveWarningsSchema }))
    .mutation(async ({ ctx, input }) => {
      const embedding = input.embedding ?? { provider: 'local' as const };
      const warnings = [
        await checkProviderUrl(ctx.deps, 'embedding.baseUrl', embedding.provider === 'openai' ? embedding.baseUrl : undefined),
        await checkProviderUrl(ctx.deps, 'llm.baseUrl', input.llm?.baseUrl),
      ];
      const { secrets } = ctx.deps;
      const row = await withEvents(
        ctx.deps,
        (trx) =>
          repo.insertConfig(trx, {
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
            embedding: embeddingSettings(embedding),
            embedding_api_key_enc: embedding.provider === 'openai' && embedding.apiKey ? secrets.seal(embedding.apiKey) : null,
            serving_embedding: embeddingSettings(embedding),
            serving_embedding_api_key_enc: embedding.provider === 'openai' && embedding.apiKey ? secrets.seal(embedding.apiKey) : null,
            llm: input.llm ? ({ provider: input.llm.provider, model: input.llm.model, baseUrl: input.llm.baseUrl } satisfies LlmSettings) : null,
            llm_api_key_enc: input.llm?.apiKey ? secrets.seal(input.llm.apiKey) : null,
            memory_enabled: input.memory?.enabled ?? true,
            memory_max_messages: input.memory?.maxMessages ?? 10,
            tools: [],
          }),
        (created) => [webhookEvent(ctx.owner.id, 'knowledge_base.created', repo.toKbConfig(created))],
      );
      return withWarnings({ config: repo.toKbConfig(row) }, warnings);
    }),

  get: ownerProcedure
    .meta({ openapi: { method: 'GET', path: '/api/v1/knowledge-base/configs/{id}', tags, summary: 'One knowledge base configuration', protect: true } })
    .input(z.object({ id: idParam }))
    .output(z.object({ config: kbConfigSchema }))
    .query(async ({ ctx, input }) => ({ config: repo.toKbConfig(await ownedConfig(ctx.deps, ctx.owner.id, input.id)) })),

  update: ownerProcedure
    .meta({
      openapi: {
        method: 'PATCH',
        path: '/api/v1/knowledge-base/configs/{id}',
        tags,
        summary: 'Change fields of a configuration (a new embedding model re-embeds in the background)',
        protect: true,
      },
    })
    .input(updateKbConfigInput)
    .output(z.object({ config: kbConfigSchema, warnings: saveWarningsSchema }))
    .mutation(async ({ ctx, input }) => {
      const current = await ownedConfig(ctx.deps, ctx.owner.id, input.id);
      const chunkSize = input.chunkSize ?? current.chunk_size;
      const chunkOverlap = input.chunkOverlap ?? current.chunk_overlap;
      if (chunkOverlap >= chunkSize / 2)
        throw new AppError('VALIDATION_FAILED', 'Invalid request parameters', 'chunkOverlap: must be less than half of chunkSize');
      const warnings = [
        await checkProviderUrl(ctx.deps, 'embedding.baseUrl', input.embedding?.provider === 'openai' ? input.embedding.baseUrl : undefined),
        await checkProviderUrl(ctx.deps, 'llm.baseUrl', input.llm?.baseUrl),
      ];
      const { secrets } = ctx.deps;
      const nextEmbedding = input.embedding ? embeddingSettings(input.embedding) : undefined;
      const embeddingChanged = nextEmbedding !== undefined && !sameEmbedding(current.embedding, nextEmbedding);
      const switching = current.serving_version !== current.embedding_version;
      // The same target saved again restarts a switch that failed (or whose job was lost); while its job is
      // queued or running, the queue's dedupe key makes this a no-op (should that job be failing at this very
      // moment, the sweep records its failure afterwards).
      const restartSwitch = nextEmbedding !== undefined && !embeddingChanged && switching;
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
      const nextLlmKey = !input.llm
        ? null
        : input.llm.apiKey
          ? secrets.seal(input.llm.apiKey)
          : sameHost(current.llm?.baseUrl, input.llm.baseUrl)
            ? current.llm_api_key_enc
            : null;
      const row = await withEvents(
        ctx.deps,
        async (trx) => {
          const updated = await repo.updateConfig(
            trx,
            current.id,
            {
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
                    embedding: nextEmbedding!,
                    embedding_api_key_enc: nextEmbeddingKey,
                    // The served model, new key: the serving side uses it too. A new model, or the target of a
                    // switch in progress or failed (another provider, perhaps), gets its key when it serves.
                    ...(embeddingChanged || switching ? {} : { serving_embedding_api_key_enc: nextEmbeddingKey }),
                    ...(embeddingChanged || restartSwitch ? { embedding_error: null } : {}),
                  }
                : {}),
              ...(input.llm !== undefined
                ? {
                    llm: input.llm ? ({ provider: input.llm.provider, model: input.llm.model, baseUrl: input.llm.baseUrl } satisfies LlmSettings) : null,
                    llm_api_key_enc: nextLlmKey,
                  }
                : {}),
            },
            embeddingChanged,
          );
          // The old vectors keep serving until the re-embedding job switches serving_version.
          if (embeddingChanged || restartSwitch) await queueReembedding(ctx.deps.jobs, { configId: updated.id, version: updated.embedding_version }, trx);
          return updated;
        },
        (updated) => [webhookEvent(ctx.owner.id, 'knowledge_base.updated', repo.toKbConfig(updated))],
      );
      if (embeddingChanged || restartSwitch) ctx.deps.jobs.notify();
      return withWarnings({ config: repo.toKbConfig(row) }, warnings);
    }),

  delete: ownerProcedure
    .meta({
      openapi: {
        method: 'DELETE',
        path: '/api/v1/knowledge-base/configs/{id}',
        tags,
        summary: 'Delete a configuration with its documents, chunks, vectors, stored files and pending jobs',
        protect: true,
      },
    })
    .input(z.object({ id: idParam }))
    .output(deletedSchema)
    .mutation(async ({ ctx, input }) => {
      const config = await ownedConfig(ctx.deps, ctx.owner.id, input.id);
      const detached = await withEvents(
        ctx.deps,
        async (trx) => {
          await ctx.deps.jobs.cancel('documentId', await repo.listDocumentIds(trx, config.id), trx);
          await ctx.deps.jobs.cancel('configId', [config.id], trx);
          await repo.deleteConfig(trx, config.id);
          return detachConfig(trx, ctx.owner.id, config.id);
        },
        (interfaces) => [
          webhookEvent(ctx.owner.id, 'knowledge_base.deleted', { id: config.id }),
          ...interfaces.map((row) => webhookEvent(ctx.owner.id, 'chat_interface.updated', toChatInterface(row))),
        ],
      );
      // A key's cached interface carries its configId.
      if (detached.length > 0) ctx.deps.apiKeyCache.invalidate();
      await ctx.deps.blobs.deletePrefix(config.id);
      return { deleted: true as const, id: config.id };
    }),

  tools: ownerProcedure
    .meta({
      openapi: {
        method: 'GET',
        path: '/api/v1/knowledge-base/configs/{id}/tools',
        tags,
        summary: 'Tools the assistant may call, and the registry of available tools',
        protect: true,
      },
    })
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
    .meta({
      openapi: {
        method: 'PATCH',
        path: '/api/v1/knowledge-base/configs/{id}/tools',
        tags,
        summary: 'Replace the tools of a knowledge base (validated against the tool registry)',
        protect: true,
      },
    })
    .input(z.object({ id: idParam, tools: z.array(toolSettingInput).max(20) }))
    .output(z.object({ tools: kbConfigSchema.shape.tools }))
    .mutation(async ({ ctx, input }) => {
      const config = await ownedConfig(ctx.deps, ctx.owner.id, input.id);
      const normalised = normaliseTools(input.tools);
      if (!normalised.ok) throw new AppError('VALIDATION_FAILED', 'Invalid request parameters', normalised.details);
      const row = await withEvents(
        ctx.deps,
        (trx) => repo.replaceTools(trx, config.id, normalised.tools),
        (updated) => [webhookEvent(ctx.owner.id, 'knowledge_base.updated', repo.toKbConfig(updated))],
      );
      return { tools: repo.toKbConfig(row).tools };
    }),

  memory: ownerProcedure
    .meta({
      openapi: {
        method: 'GET',
        path: '/api/v1/knowledge-base/configs/{id}/memory',
        tags,
        summary: 'Conversation-memory settings (set through the configuration PATCH: memory.enabled, memory.maxMessages)',
        protect: true,
      },
    })
    .input(z.object({ id: idParam }))
    .output(z.object({ memory: kbConfigSchema.shape.memory, configId: z.string() }))
    .query(async ({ ctx, input }) => {
      const config = await ownedConfig(ctx.deps, ctx.owner.id, input.id);
      return { configId: config.id, memory: { enabled: config.memory_enabled, maxMessages: config.memory_max_messages } };
    }),
});
