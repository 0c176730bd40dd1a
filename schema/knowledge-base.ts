import { z } from 'zod';
import { headerCredential, idParam, timestamp } from './common.ts';

/**
 * The spec's sample sends temperature as a numeric string; accept both, and nothing else. The number branch is `inner`
 * itself, so the OpenAPI document (generated from the input side) carries its range and integer rule.
 */
const numeric = (inner: z.ZodNumber) =>
  z
    .union([inner, z.string().regex(/^-?\d+(\.\d+)?$/, 'must be a number written in decimal digits')])
    .transform(Number)
    .pipe(inner);

export const kbLanguageSchema = z.enum(['en', 'es', 'fr', 'de', 'pt', 'other']);
const providerUrl = z.url({ protocol: /^https?$/, error: 'must be an http(s) URL' }).max(2048);

export const embeddingInputSchema = z.discriminatedUnion('provider', [
  z.object({ provider: z.literal('local'), dimensions: z.number().int().min(64).max(2048).optional() }),
  z.object({
    provider: z.literal('openai'),
    baseUrl: providerUrl.meta({ description: 'OpenAI-compatible server (OpenAI, Ollama, vLLM, TEI...); /v1/embeddings is appended' }),
    model: z.string().min(1).max(200),
    dimensions: z.number().int().min(8).max(8192).optional(),
    apiKey: headerCredential(4096).optional().meta({ description: 'Stored encrypted, never returned' }),
  }),
]);

export const llmInputSchema = z.object({
  provider: z.enum(['openai', 'messages']).meta({
    description: 'openai: an OpenAI-compatible chat server (/v1/chat/completions); messages: a messages-style server (/v1/messages, x-api-key)',
  }),
  baseUrl: providerUrl.meta({ description: 'The server; /v1/chat/completions or /v1/messages is appended' }),
  model: z.string().min(1).max(200),
  apiKey: headerCredential(4096).optional().meta({ description: 'Stored encrypted, never returned' }),
});

export const memoryInputSchema = z.object({
  enabled: z.boolean().optional(),
  maxMessages: z.number().int().min(0).max(100).optional().meta({ description: 'How many past messages of a session reach the model' }),
});

const configFields = {
  name: z.string().trim().min(1).max(100),
  // Kept to two decimals, as it is read back: the column is a 4-byte real, where a tiny value such as 1e-320 is out
  // of range (a database error) and 1e-40 silently becomes 0.
  temperature: numeric(z.number().min(0, 'must be between 0.0 and 2.0').max(2, 'must be between 0.0 and 2.0'))
    .transform((value) => Math.round(value * 100) / 100)
    .meta({
      description: '0.0 factual to 2.0 very creative (a numeric string is accepted)',
    }),
  maxTokens: numeric(z.number().int('must be an integer').min(1).max(32_000)).meta({ description: 'Response length cap' }),
  chunkSize: z.number().int().min(100).max(8000).meta({ description: 'Characters per chunk' }),
  chunkOverlap: z.number().int().min(0).max(4000),
  retrievalDepth: z.number().int().min(1).max(50).meta({ description: 'Passages retrieved per query' }),
  language: kbLanguageSchema,
  systemPrompt: z.string().max(8000).nullable(),
  embedding: embeddingInputSchema,
  llm: llmInputSchema.nullable().meta({ description: 'Language model that writes answers; null = extractive answers' }),
  memory: memoryInputSchema,
};

const overlapBelowSize = (v: { chunkSize?: number; chunkOverlap?: number }) =>
  v.chunkSize === undefined || v.chunkOverlap === undefined || v.chunkOverlap < v.chunkSize / 2;

export const createKbConfigInput = z
  .object(
    Object.fromEntries(Object.entries(configFields).map(([k, v]) => [k, v.optional()])) as {
      [K in keyof typeof configFields]: z.ZodOptional<(typeof configFields)[K]>;
    },
  )
  .refine(overlapBelowSize, { message: 'must be less than half of chunkSize', path: ['chunkOverlap'] });

export const updateKbConfigInput = z
  .object({
    id: idParam,
    ...(Object.fromEntries(Object.entries(configFields).map(([k, v]) => [k, v.optional()])) as {
      [K in keyof typeof configFields]: z.ZodOptional<(typeof configFields)[K]>;
    }),
  })
  .refine(overlapBelowSize, { message: 'must be less than half of chunkSize', path: ['chunkOverlap'] });

export const kbConfigSchema = z
  .object({
    id: z.string(),
    name: z.string(),
    temperature: z.number(),
    maxTokens: z.number().int(),
    chunkSize: z.number().int(),
    chunkOverlap: z.number().int(),
    retrievalDepth: z.number().int(),
    language: kbLanguageSchema,
    systemPrompt: z.string().nullable(),
    embedding: z
      .object({
        provider: z.enum(['local', 'openai']),
        model: z.string(),
        baseUrl: z.string().nullable(),
        dimensions: z.number().int(),
        hasApiKey: z.boolean(),
        error: z.string().nullable().meta({
          description:
            'Why the switch to this model failed (its re-embedding gave up), or null; the serving model keeps answering. Saving the embedding settings again, even unchanged, retries the switch',
        }),
      })
      .meta({ description: 'The configured embedding model (during a re-embedding, or after a failed one: the one being moved to)' }),
    servingEmbeddingModel: z.string().meta({ description: 'The model of the vectors queries use now' }),
    llm: z.object({ provider: z.enum(['openai', 'messages']), model: z.string(), baseUrl: z.string(), hasApiKey: z.boolean() }).nullable(),
    memory: z.object({ enabled: z.boolean(), maxMessages: z.number().int() }),
    tools: z.array(z.object({ name: z.string(), enabled: z.boolean(), config: z.record(z.string(), z.unknown()) })),
    embeddingStatus: z.object({
      servingVersion: z.number().int(),
      targetVersion: z.number().int(),
      reembedding: z.boolean().meta({
        description:
          'true while a model change is re-embedding in the background; queries keep using the serving version. false again when it finished or failed (embedding.error)',
      }),
    }),
    createdAt: timestamp,
    updatedAt: timestamp,
  })
  .meta({ id: 'KnowledgeBaseConfig' });

export const kbDocumentSchema = z
  .object({
    id: z.string(),
    configId: z.string(),
    fileName: z.string(),
    kind: z.enum(['pdf', 'docx', 'txt', 'md']),
    sizeBytes: z.number().int(),
    status: z.enum(['processing', 'completed', 'failed']),
    stage: z.enum(['uploaded', 'extracting', 'embedding', 'indexing', 'searchable', 'failed']),
    error: z.string().nullable().meta({ description: 'Why processing failed' }),
    pageCount: z.number().int().nullable(),
    chunkCount: z.number().int(),
    createdAt: timestamp,
    updatedAt: timestamp,
  })
  .meta({ id: 'KnowledgeBaseDocument' });

export const usageSchema = z
  .object({ promptTokens: z.number().int(), completionTokens: z.number().int(), totalTokens: z.number().int() })
  .meta({ id: 'Usage' });

export const sourceSchema = z
  .object({
    chunkId: z.string(),
    documentId: z.string(),
    text: z.string(),
    score: z.number().meta({ description: 'Relevance in [0, 1] (fused lexical and vector ranks)' }),
    page: z.number().int().nullable(),
    metadata: z.object({ fileName: z.string(), documentId: z.string(), page: z.number().int().nullable(), chunkIndex: z.number().int() }),
  })
  .meta({ id: 'Source' });

export const queryInput = z.object({
  query: z.string().trim().min(1).max(4000),
  configId: idParam,
});

export const queryResultSchema = z.object({ answer: z.string(), sources: z.array(sourceSchema), usage: usageSchema });
