import type { AppDeps } from '../context.ts';
import type { AppError } from '../../schema/errors.ts';
import { createChatCompletion, streamChatCompletion, type ChatMessage } from '../../adapters/outbound/ai/openai-chat.ts';
import type { AiUsage } from '../../adapters/outbound/ai/core/response.ts';
import type { AiUpstreamError } from '../../adapters/outbound/ai/core/upstream-error.ts';
import { rethrowUpstream, upstreamAppError } from '../ai-errors.ts';
import { buildExtractiveAnswer } from './extractive-answer.ts';
import { countTokens } from '../../adapters/outbound/text/tokens.ts';
import { retrieve, type RetrievedPassage } from './retrieve.ts';
import type { KbConfigRow } from './repository.ts';

const DEFAULT_SYSTEM_PROMPT =
  'You answer questions using only the numbered context passages. Cite the passages you use as [n]. ' +
  'If the context does not contain the answer, say that you do not know; never invent facts.';
const NOT_FOUND_ANSWER = 'I could not find anything about that in the knowledge base.';

export function toSource(p: RetrievedPassage) {
  return {
    chunkId: p.chunkId,
    documentId: p.documentId,
    text: p.text,
    score: p.score,
    page: p.page,
    metadata: { fileName: p.fileName, documentId: p.documentId, page: p.page, chunkIndex: p.chunkIndex },
  };
}
export type Source = ReturnType<typeof toSource>;

function promptMessages(config: KbConfigRow, query: string, passages: RetrievedPassage[], history: ChatMessage[]): ChatMessage[] {
  const context = passages.map((p, i) => `[${i + 1}] (${p.fileName}${p.page ? `, p. ${p.page}` : ''})\n${p.text}`).join('\n\n');
  return [
    { role: 'system', content: config.system_prompt?.trim() || DEFAULT_SYSTEM_PROMPT },
    ...history,
    { role: 'user', content: `Context:\n${context}\n\nQuestion: ${query}` },
  ];
}

/** What answering uses: retrieval's dependencies, plus the outbound client and the key box for the language model. */
export type AnswerDeps = Parameters<typeof retrieve>[0] & Pick<AppDeps, 'http' | 'secrets'>;

function llmRequest(deps: Pick<AppDeps, 'secrets'>, config: KbConfigRow, messages: ChatMessage[], signal?: AbortSignal) {
  const llm = config.llm!;
  return {
    baseUrl: llm.baseUrl,
    model: llm.model,
    apiKey: config.llm_api_key_enc ? deps.secrets.open(config.llm_api_key_enc) : undefined,
    messages,
    temperature: config.temperature,
    maxTokens: config.max_tokens,
    signal,
  };
}

/** The embedding provider's and the language model's failures, as routers/ai-errors.ts maps them (an owner's by default). */
function upstreamFailure(error: unknown, options: AnswerOptions): never {
  rethrowUpstream(error, options.onUpstreamError ?? ((e) => upstreamAppError(e, 'owner')));
}

function extractive(query: string, passages: RetrievedPassage[], embeddingTokens: number) {
  const { answer } = buildExtractiveAnswer(
    query,
    passages.map((p) => ({ chunkId: p.chunkId, text: p.text, fileName: p.fileName, page: p.page, score: p.score })),
  );
  const promptTokens = embeddingTokens || countTokens(query);
  const completionTokens = countTokens(answer);
  return { answer, usage: { promptTokens, completionTokens, totalTokens: promptTokens + completionTokens } };
}

export interface AnswerOptions {
  signal?: AbortSignal;
  history?: ChatMessage[];
  /** How an embedding-provider or language-model failure reaches the caller; by default as the owner's (with the provider's reason). */
  onUpstreamError?: (error: AiUpstreamError) => AppError;
}

export async function answerQuery(deps: AnswerDeps, config: KbConfigRow, query: string, options: AnswerOptions = {}) {
  try {
    const { passages, embeddingTokens } = await retrieve(deps, config, query, config.retrieval_depth, { signal: options.signal });
    const sources = passages.map(toSource);
    if (!config.llm) return { ...extractive(query, passages, embeddingTokens), sources };
    if (passages.length === 0) return { answer: NOT_FOUND_ANSWER, sources, usage: { promptTokens: 0, completionTokens: 0, totalTokens: 0 } };
    const reply = await createChatCompletion(
      deps.http,
      llmRequest(deps, config, promptMessages(config, query, passages, options.history ?? []), options.signal),
    );
    return { answer: reply.text, sources, usage: reply.usage };
  } catch (error) {
    upstreamFailure(error, options);
  }
}

export type AnswerEvent =
  | { type: 'sources'; sources: Source[] }
  | { type: 'delta'; text: string }
  | { type: 'complete'; answer: string; sources: Source[]; usage: AiUsage };

/** The streaming form: sources first, then answer deltas (the provider's own stream when a model is set), then complete. */
export async function* streamAnswer(deps: AnswerDeps, config: KbConfigRow, query: string, options: AnswerOptions = {}): AsyncGenerator<AnswerEvent> {
  try {
    const { passages, embeddingTokens } = await retrieve(deps, config, query, config.retrieval_depth, { signal: options.signal });
    const sources = passages.map(toSource);
    yield { type: 'sources', sources };
    if (!config.llm || passages.length === 0) {
      const result = config.llm
        ? { answer: NOT_FOUND_ANSWER, usage: { promptTokens: 0, completionTokens: 0, totalTokens: 0 } }
        : extractive(query, passages, embeddingTokens);
      // Extractive answers are ready at once; they are still sent as deltas (paragraph by paragraph) for one client code path.
      for (const part of result.answer.split(/(?<=\n\n)/)) yield { type: 'delta', text: part };
      yield { type: 'complete', answer: result.answer, sources, usage: result.usage };
      return;
    }
    for await (const event of streamChatCompletion(deps.http, {
      ...llmRequest(deps, config, promptMessages(config, query, passages, options.history ?? []), options.signal),
      timeoutMs: 120_000,
    })) {
      if (event.type === 'delta') yield { type: 'delta', text: event.text };
      else yield { type: 'complete', answer: event.text, sources, usage: event.usage };
    }
  } catch (error) {
    upstreamFailure(error, options);
  }
}
