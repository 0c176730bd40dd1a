import type { AppDeps } from '../context.ts';
import type { AppError } from '../../schema/errors.ts';
import { createStreamCleaner, parseUntrustedJson, toStorable } from '../../schema/text-input.ts';
import { createChatCompletion, streamChatCompletion, type ChatMessage, type ChatRequest, type ModelTool } from '../../adapters/outbound/ai/openai-chat.ts';
import { createMessagesCompletion } from '../../adapters/outbound/ai/messages-chat.ts';
import type { AiUsage } from '../../adapters/outbound/ai/core/response.ts';
import { AiUpstreamError } from '../../adapters/outbound/ai/core/upstream-error.ts';
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
export type AnswerDeps = Parameters<typeof retrieve>[0] & Pick<AppDeps, 'http' | 'secrets' | 'config'>;

/** The model is an outbound call like any other: the spec's outbound timeout (OUTBOUND_TIMEOUT_MS) bounds it, streamed or not. */
function llmRequest(deps: Pick<AppDeps, 'secrets' | 'config'>, config: KbConfigRow, messages: ChatMessage[], signal?: AbortSignal) {
  const llm = config.llm!;
  return {
    baseUrl: llm.baseUrl,
    model: llm.model,
    apiKey: config.llm_api_key_enc ? deps.secrets.open(config.llm_api_key_enc) : undefined,
    messages,
    temperature: config.temperature,
    maxTokens: config.max_tokens,
    timeoutMs: deps.config.OUTBOUND_TIMEOUT_MS,
    signal,
  };
}

/** One completion from the knowledge base's model, in its provider's format. */
function complete(deps: Pick<AppDeps, 'http'>, config: KbConfigRow, req: ChatRequest) {
  return config.llm?.provider === 'messages' ? createMessagesCompletion(deps.http, req) : createChatCompletion(deps.http, req);
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

/** A tool call the model made during an answer, with what it returned (or why it failed). */
export interface ExecutedToolCall {
  name: string;
  arguments: Record<string, unknown>;
  result?: unknown;
  error?: string;
}

/** The tools a model may call while answering, and how a call is carried out (bounded by the caller). */
export interface ToolRunner {
  definitions: ModelTool[];
  /** Runs one call, given at most `timeoutMs` (the runner may allow itself less). */
  run(name: string, args: unknown, timeoutMs: number): Promise<{ ok: true; result: unknown } | { ok: false; error: string }>;
}

/** Model turns per answer at most: a model that keeps calling tools gets a final answer asked for without them. */
const MAX_TOOL_STEPS = 4;
/** Calls run per model turn; the rest are answered with an error without running (a model cannot fan out). */
const MAX_CALLS_PER_STEP = 8;
/** What is kept of one call's arguments or result, serialised (the copy the model gets is cut the same way). */
const MAX_KEPT_CHARS = 16_000;

/** A value kept whole when small, else a preview of its JSON: a tool's answer never grows the reply unbounded. */
function bounded<T>(value: T): T | { truncated: true; preview: string } {
  const text = JSON.stringify(value) ?? 'null';
  return text.length <= MAX_KEPT_CHARS ? value : { truncated: true, preview: text.slice(0, MAX_KEPT_CHARS) };
}

export interface AnswerOptions {
  signal?: AbortSignal;
  history?: ChatMessage[];
  /** Tools offered through the model's native tool calling (only with a language model). */
  tools?: ToolRunner;
  /** How an embedding-provider or language-model failure reaches the caller; by default as the owner's (with the provider's reason). */
  onUpstreamError?: (error: AiUpstreamError) => AppError;
}

/**
 * The model answers with tools at hand: each round its tool calls run (arguments parsed, failures reported back to
 * it as errors), their results go back as tool messages, and after MAX_TOOL_STEPS rounds it must answer in text.
 *
 * One deadline bounds the model's part of the answer, so that a model and tools each within their own timeouts
 * cannot hold a visitor for minutes: twice the outbound timeout, the last outbound timeout of it kept for the final
 * answer. The rounds with tools (model calls and tool calls alike) get only the time before that reserve; once it is
 * spent, the calls left are not run, and a model call offered tools that runs out of it is dropped, and the model is
 * asked to answer without tools, with the reserve.
 */
async function answerWithTools(deps: AnswerDeps, config: KbConfigRow, messages: ChatMessage[], tools: ToolRunner, signal?: AbortSignal) {
  const executed: ExecutedToolCall[] = [];
  const usage = { promptTokens: 0, completionTokens: 0, totalTokens: 0 };
  const conversation = [...messages];
  const reserve = deps.config.OUTBOUND_TIMEOUT_MS;
  const deadline = Date.now() + 2 * reserve;
  const timeForTools = () => deadline - reserve - Date.now();
  let toolsClosed = false;
  for (let step = 0; ; step++) {
    const toolTime = timeForTools();
    const offered = !toolsClosed && step < MAX_TOOL_STEPS && toolTime > 0 ? tools.definitions : [];
    const timeoutMs = offered.length > 0 ? Math.min(reserve, toolTime) : Math.max(1, Math.min(reserve, deadline - Date.now()));
    let reply: Awaited<ReturnType<typeof complete>>;
    try {
      reply = await complete(deps, config, { ...llmRequest(deps, config, conversation, signal), timeoutMs, tools: offered });
    } catch (error) {
      // Cut short by the tools' window, not by its own timeout: the final answer, without tools, still has the reserve.
      if (offered.length > 0 && timeoutMs < reserve && error instanceof AiUpstreamError && error.kind === 'timeout') {
        toolsClosed = true;
        continue;
      }
      throw error;
    }
    usage.promptTokens += reply.usage.promptTokens;
    usage.completionTokens += reply.usage.completionTokens;
    usage.totalTokens += reply.usage.totalTokens;
    if (reply.toolCalls.length === 0 || offered.length === 0) return { answer: reply.text, usage, toolCalls: executed };
    const calls = reply.toolCalls.map((call) => ({ ...call, name: call.name.slice(0, 64), arguments: call.arguments.slice(0, MAX_KEPT_CHARS) }));
    conversation.push({ role: 'assistant', content: reply.text, toolCalls: calls });
    for (const [index, call] of calls.entries()) {
      if (index >= MAX_CALLS_PER_STEP) {
        const error = `Not run: at most ${MAX_CALLS_PER_STEP} tool calls are carried out per turn`;
        conversation.push({ role: 'tool', toolCallId: call.id, content: JSON.stringify({ error }) });
        if (index === MAX_CALLS_PER_STEP)
          executed.push({ name: call.name, arguments: {}, error: `${calls.length - MAX_CALLS_PER_STEP} more calls were not run` });
        continue;
      }
      const left = timeForTools();
      if (left <= 0) {
        const error = 'Not run: the time for tools in this answer is spent';
        executed.push({ name: call.name, arguments: {}, error });
        conversation.push({ role: 'tool', toolCallId: call.id, content: JSON.stringify({ error }) });
        continue;
      }
      let args: Record<string, unknown> | undefined;
      try {
        const parsed: unknown = parseUntrustedJson(call.arguments || '{}');
        args = typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed) ? (parsed as Record<string, unknown>) : undefined;
      } catch {
        args = undefined;
      }
      const outcome = args === undefined ? { ok: false as const, error: 'The arguments were not a JSON object' } : await tools.run(call.name, args, left);
      const shown = (args ? bounded(args) : { raw: call.arguments.slice(0, 2000) }) as Record<string, unknown>;
      executed.push(
        outcome.ok
          ? { name: call.name, arguments: shown, result: bounded(outcome.result) }
          : { name: call.name, arguments: shown, error: outcome.error.slice(0, 1000) },
      );
      conversation.push({
        role: 'tool',
        toolCallId: call.id,
        content: (JSON.stringify(outcome.ok ? outcome.result : { error: outcome.error }) ?? 'null').slice(0, MAX_KEPT_CHARS),
      });
    }
  }
}

/**
 * Whether the answer had a good source: a passage that matched the words of the question. A passage found only by
 * vector similarity is always there (some vector is nearest), so it does not count; the dashboard lists the
 * questions without one as the knowledge base's gaps.
 */
const isGrounded = (passages: RetrievedPassage[]) => passages.some((p) => p.lexicalRank !== null);

export async function answerQuery(deps: AnswerDeps, config: KbConfigRow, query: string, options: AnswerOptions = {}) {
  try {
    const { passages, embeddingTokens } = await retrieve(deps, config, query, config.retrieval_depth, { signal: options.signal });
    const sources = passages.map(toSource);
    const grounded = isGrounded(passages);
    if (!config.llm) return { ...extractive(query, passages, embeddingTokens), sources, grounded };
    if (options.tools?.definitions.length) {
      const messages = promptMessages(config, query, passages, options.history ?? []);
      return { ...(await answerWithTools(deps, config, messages, options.tools, options.signal)), sources, grounded };
    }
    if (passages.length === 0) return { answer: NOT_FOUND_ANSWER, sources, grounded, usage: { promptTokens: 0, completionTokens: 0, totalTokens: 0 } };
    const reply = await complete(deps, config, llmRequest(deps, config, promptMessages(config, query, passages, options.history ?? []), options.signal));
    return { answer: reply.text, sources, grounded, usage: reply.usage };
  } catch (error) {
    upstreamFailure(error, options);
  }
}

export type AnswerEvent =
  | { type: 'sources'; sources: Source[] }
  | { type: 'delta'; text: string }
  | { type: 'complete'; answer: string; sources: Source[]; usage: AiUsage; toolCalls?: ExecutedToolCall[]; grounded: boolean };

/** The streaming form: sources first, then answer deltas (the provider's own stream when a model is set), then complete. */
export async function* streamAnswer(deps: AnswerDeps, config: KbConfigRow, query: string, options: AnswerOptions = {}): AsyncGenerator<AnswerEvent> {
  try {
    const { passages, embeddingTokens } = await retrieve(deps, config, query, config.retrieval_depth, { signal: options.signal });
    const sources = passages.map(toSource);
    const grounded = isGrounded(passages);
    yield { type: 'sources', sources };
    if (config.llm && options.tools?.definitions.length) {
      // Tool rounds are not streamed: the final text arrives as one delta once the tools have run.
      const result = await answerWithTools(deps, config, promptMessages(config, query, passages, options.history ?? []), options.tools, options.signal);
      const answer = toStorable(result.answer);
      yield { type: 'delta', text: answer };
      yield { type: 'complete', answer, sources, usage: result.usage, toolCalls: result.toolCalls, grounded };
      return;
    }
    if (!config.llm || passages.length === 0) {
      const result = config.llm
        ? { answer: NOT_FOUND_ANSWER, usage: { promptTokens: 0, completionTokens: 0, totalTokens: 0 } }
        : extractive(query, passages, embeddingTokens);
      // Extractive answers are ready at once; they are still sent as deltas (paragraph by paragraph) for one client code path.
      for (const part of result.answer.split(/(?<=\n\n)/)) yield { type: 'delta', text: part };
      yield { type: 'complete', answer: result.answer, sources, usage: result.usage, grounded };
      return;
    }
    if (config.llm.provider === 'messages') {
      // Messages-style models answer whole here: the reply arrives as one delta.
      const reply = await complete(deps, config, llmRequest(deps, config, promptMessages(config, query, passages, options.history ?? []), options.signal));
      const answer = toStorable(reply.text);
      yield { type: 'delta', text: answer };
      yield { type: 'complete', answer, sources, usage: reply.usage, grounded };
      return;
    }
    // A model's text is not a client's: NUL dropped and lone surrogates replaced, the same in the deltas as in the answer.
    const cleaner = createStreamCleaner();
    for await (const event of streamChatCompletion(
      deps.http,
      llmRequest(deps, config, promptMessages(config, query, passages, options.history ?? []), options.signal),
    )) {
      if (event.type === 'delta') {
        const text = cleaner.clean(event.text);
        if (text !== '') yield { type: 'delta', text };
        continue;
      }
      const rest = cleaner.end();
      if (rest !== '') yield { type: 'delta', text: rest };
      yield { type: 'complete', answer: toStorable(event.text), sources, usage: event.usage, grounded };
    }
  } catch (error) {
    upstreamFailure(error, options);
  }
}
