import type { z } from 'zod';
import { AppError } from '../../schema/errors.ts';
import type { chatRequestSchema } from '../../schema/chat.ts';
import { createStreamCleaner, toStorable } from '../../schema/text-input.ts';
import type { AppDeps, Context } from '../context.ts';
import { findConfig } from '../knowledge-base/repository.ts';
import type { KeyInterface } from '../auth/principal.ts';
import * as repo from './repository.ts';
import { runChatBackend, streamChatBackend, type ChatBackendInput, type ChatBackendReply } from './backend.ts';
import { selectToolCalls } from './tools.ts';
import { offerSlots } from '../bookings/offer.ts';
import { connectedTools, type RunnableTool, toolRunner } from '../toolhub/runner.ts';
import type { KbConfigRow } from '../knowledge-base/repository.ts';
import { chatTurnActivity, failedCallActivity, upstreamErrorKind } from '../dashboard/activity.ts';
import { countActivity } from '../dashboard/repository.ts';

const sessionNotFound = () => new AppError('NOT_FOUND', 'Session not found');
/** History carried to an external endpoint when no knowledge-base memory setting applies. */
const DEFAULT_HISTORY = 10;

export interface PreparedChat {
  backend: ChatBackendInput;
  session: { id: string; chatInterfaceId: string; ownerId: string; isNew: boolean; visitorId: string | null };
  /** Intent matching's tool calls (no model), or, when the model calls tools, the form one of them asked for. */
  tools: ReturnType<typeof selectToolCalls>;
  /** Set when the knowledge base's model was offered tools: their calls come back with its reply. */
  modelTools?: { form: { value: Record<string, unknown> | null } };
}

/** Who sends the turn: an API key (with the interface it came with) or a visitor of a public interface. */
export type ChatSender =
  | { kind: 'apiKey'; ownerId: string; chatInterfaceId: string; chatInterface?: KeyInterface }
  | { kind: 'visitor'; chatInterfaceId: string; visitorId: string };

/**
 * One chat turn, whoever sends it (an integrator's API key or a visitor of the hosted page): find the interface
 * and the session, ask the backend, store the exchange, answer as JSON or as a stream of events.
 */
export async function prepareChat(
  deps: Pick<AppDeps, 'database' | 'secrets' | 'http' | 'config' | 'webhookJobs'>,
  key: ChatSender,
  input: z.infer<typeof chatRequestSchema>,
  requestId: string,
  signal?: AbortSignal,
): Promise<PreparedChat> {
  const db = deps.database.db;
  // The key's own interface came with the key; only a mismatched slug needs a lookup (to tell 403 from 404).
  const known = key.kind === 'apiKey' && key.chatInterface?.slug === input.slug ? key.chatInterface : undefined;
  const iface = known ?? (await repo.findInterfaceBySlug(db, input.slug));
  // A visitor sees only public interfaces: a private one is as unknown as a missing one. Another owner's interface
  // is as unknown to a key as a missing one too (the key must not tell which slugs exist); only the owner's own
  // other interfaces are a 403.
  if (!iface || (key.kind === 'visitor' ? !('public' in iface && iface.public) : iface.owner_id !== key.ownerId)) {
    throw new AppError('NOT_FOUND', 'Chat interface not found');
  }
  if (iface.id !== key.chatInterfaceId) {
    throw new AppError(
      'FORBIDDEN',
      key.kind === 'apiKey' ? 'This API key belongs to another chat interface' : 'This visitor token belongs to another chat interface',
    );
  }
  const visitorId = key.kind === 'visitor' ? key.visitorId : null;
  let isNew = true;
  let sessionId = repo.newSessionId();
  if (input.sessionId) {
    const existing = await repo.findSession(db, input.sessionId);
    // A session belongs to one interface (and a visitor's to that visitor): any other id is as unknown as a made-up one.
    if (!existing || existing.chat_interface_id !== iface.id || (visitorId !== null && existing.visitor_id !== visitorId)) throw sessionNotFound();
    isNew = false;
    sessionId = existing.id;
  }
  const kb = iface.config_id ? ((await findConfig(db, iface.owner_id, iface.config_id)) ?? null) : null;
  const historyLimit = kb ? (kb.memory_enabled ? kb.memory_max_messages : 0) : DEFAULT_HISTORY;
  const history = isNew
    ? []
    : (await repo.recentMessages(db, sessionId, historyLimit)).map((m) => ({
        role: m.role === 'user' ? ('user' as const) : ('assistant' as const),
        content: m.content,
      }));
  const endpoint = iface.endpoint_url ? { url: iface.endpoint_url, type: iface.endpoint_type as never, apiKeyEnc: iface.endpoint_api_key_enc } : null;
  // A knowledge base with a model calls tools natively; without one, intent matching picks them.
  const modelTools = !endpoint && kb?.llm ? await modelToolsOf(deps, kb, iface) : null;
  return {
    ...(modelTools ? { modelTools: { form: modelTools.form } } : {}),
    backend: {
      ...(modelTools ? { tools: modelTools.runner } : {}),
      endpoint,
      kb,
      message: input.message,
      sessionId,
      history,
      signal,
      requestId,
    },
    session: { id: sessionId, chatInterfaceId: iface.id, ownerId: iface.owner_id, isNew, visitorId },
    tools: modelTools ? { toolCalls: [], formConfig: {} } : await withOfferedSlots(deps, iface, selectToolCalls(input.message, kb?.tools ?? [])),
  };
}

/**
 * The tools a knowledge base's model may call: its own (lead capture shows the form, booking offers the free slots)
 * and the connected-account tools enabled for it. Null when there are none (the model then answers plainly).
 */
async function modelToolsOf(
  deps: Pick<AppDeps, 'database' | 'secrets' | 'http' | 'config' | 'webhookJobs'>,
  kb: KbConfigRow,
  iface: { id: string; slug: string; owner_id: string },
) {
  const form: { value: Record<string, unknown> | null } = { value: null };
  const builtIn: RunnableTool[] = [];
  const lead = kb.tools.find((t) => t.name === 'lead_capture' && t.enabled);
  if (lead) {
    builtIn.push({
      definition: {
        name: 'lead_capture',
        description: 'Shows the visitor a form to leave their contact details. Call it when they ask to be contacted by a person.',
        parameters: {
          type: 'object',
          properties: { reason: { type: 'string', description: 'Why the visitor wants to be contacted' } },
          additionalProperties: false,
        },
      },
      run: async () => {
        form.value = { tool: 'lead_capture', ...(lead.config ?? {}) };
        return { shown: true, note: 'The visitor now sees the form; tell them briefly to fill it in.' };
      },
    });
  }
  const booking = kb.tools.find((t) => t.name === 'book_slot' && t.enabled);
  let offer: ReturnType<typeof offerSlots> | undefined;
  if (booking) {
    builtIn.push({
      definition: {
        name: 'book_slot',
        description: 'Finds the next free appointment slots. Call it when the visitor wants to book a meeting; the visitor picks one in the chat.',
        parameters: { type: 'object', properties: {}, additionalProperties: false },
      },
      // Read once per turn: a model calling it again gets the same offer without the work.
      run: () => (offer ??= offerSlots(deps, iface, booking.config ?? {})),
    });
  }
  const tools = [...builtIn, ...(await connectedTools(deps, iface.owner_id, kb.id))];
  return tools.length > 0 ? { runner: toolRunner(tools), form } : null;
}

/** A booking tool call carries the interface's next free slots, read now. */
async function withOfferedSlots(deps: Pick<AppDeps, 'database'>, iface: { id: string; slug: string }, tools: ReturnType<typeof selectToolCalls>) {
  const booking = tools.toolCalls.find((call) => call.name === 'book_slot');
  if (!booking) return tools;
  const offer = await offerSlots(deps, iface, booking.arguments);
  return { ...tools, toolCalls: tools.toolCalls.map((call) => (call === booking ? { name: call.name, arguments: offer } : call)) };
}

/** The turn's tool calls and form: the model's executed calls when it had tools, intent matching's otherwise. */
function toolsOf(prepared: PreparedChat, reply: ChatBackendReply) {
  if (!prepared.modelTools) return prepared.tools;
  return { toolCalls: reply.toolCalls ?? [], formConfig: prepared.modelTools.form.value ?? {} };
}

/** What the turn adds to the owner's dashboard. */
function turnActivity(prepared: PreparedChat, reply: ChatBackendReply, latencyMs: number) {
  const { session, backend } = prepared;
  return chatTurnActivity({
    isNewSession: session.isNew,
    // A visitor of the hosted page is one person across sessions; an integrator's session is all we know.
    visitorKey: session.visitorId ? `v:${session.visitorId}` : `s:${session.id}`,
    usage: reply.usage,
    knowledgeBase: !backend.endpoint,
    grounded: reply.grounded ?? false,
    question: backend.message,
    latencyMs,
  });
}

async function record(deps: Pick<AppDeps, 'database' | 'webhookJobs'>, prepared: PreparedChat, reply: ChatBackendReply, toolCalls: unknown, latencyMs: number) {
  const { webhooksQueued } = await repo.recordExchange(deps.database.db, prepared.session, {
    message: prepared.backend.message,
    reply: reply.text,
    sources: reply.sources,
    usage: reply.usage,
    toolCalls,
    activity: turnActivity(prepared, reply, latencyMs),
  });
  if (webhooksQueued > 0) deps.webhookJobs.notify();
}

/** The backend's kind as a metrics label: the connector type of an external endpoint, or the knowledge base. */
const backendLabel = (prepared: PreparedChat) => (prepared.backend.endpoint ? (prepared.backend.endpoint.type ?? 'detected') : 'knowledge_base');

/**
 * A failed backend call counts in the interface's monitoring (its kind and how long it took). Counting must not
 * replace the visitor's error with a database one, so its own failure is only logged.
 */
async function countFailure(ctx: Context, prepared: PreparedChat, error: unknown, latencyMs: number) {
  const kind = error instanceof AppError && error.code.startsWith('UPSTREAM_') ? upstreamErrorKind(String(error.details)) : undefined;
  if (!kind) return;
  try {
    await countActivity(ctx.deps.database.db, prepared.session.ownerId, prepared.session.chatInterfaceId, failedCallActivity(kind, latencyMs));
  } catch (countError) {
    ctx.deps.logger.warn('could not count a failed chat backend call', { requestId: ctx.requestId, error: String(countError) });
  }
}

export async function* streamChat(ctx: Context, prepared: PreparedChat) {
  const started = performance.now();
  let observed = false;
  const observe = (outcome: 'ok' | 'error') => {
    if (observed) return;
    observed = true;
    ctx.deps.metrics.observeUpstream({ type: backendLabel(prepared), outcome }, (performance.now() - started) / 1000);
  };
  // Visitors get the same text streamed as in the stored answer: NUL dropped, lone surrogates replaced.
  const cleaner = createStreamCleaner();
  try {
    for await (const event of streamChatBackend(ctx.deps, prepared.backend)) {
      if (event.type === 'delta') {
        const text = cleaner.clean(event.text);
        if (text !== '') yield { type: 'delta' as const, text };
        continue;
      }
      const rest = cleaner.end();
      if (rest !== '') yield { type: 'delta' as const, text: rest };
      observe('ok');
      yield { type: 'complete' as const, success: true, ...(await finish(ctx, prepared, event.reply, performance.now() - started)) };
    }
  } catch (error) {
    if (!observed) await countFailure(ctx, prepared, error, performance.now() - started);
    observe('error');
    throw error;
  }
}

export async function answerChat(ctx: Context, prepared: PreparedChat) {
  const started = performance.now();
  let reply: ChatBackendReply;
  try {
    reply = await runChatBackend(ctx.deps, prepared.backend);
  } catch (error) {
    ctx.deps.metrics.observeUpstream({ type: backendLabel(prepared), outcome: 'error' }, (performance.now() - started) / 1000);
    await countFailure(ctx, prepared, error, performance.now() - started);
    throw error;
  }
  const latencyMs = performance.now() - started;
  ctx.deps.metrics.observeUpstream({ type: backendLabel(prepared), outcome: 'ok' }, latencyMs / 1000);
  return finish(ctx, prepared, reply, latencyMs);
}

/** Stores the exchange and gives the response fields. */
async function finish(ctx: Context, prepared: PreparedChat, upstreamReply: ChatBackendReply, latencyMs: number) {
  // The reply is the upstream's text: whatever it holds, it must be storable (NUL dropped, lone surrogates replaced).
  const reply = toStorable(upstreamReply);
  const tools = toStorable(toolsOf(prepared, reply));
  await record(ctx.deps, prepared, reply, tools.toolCalls, latencyMs);
  return {
    message: reply.text,
    sources: reply.sources,
    usage: reply.usage,
    sessionId: prepared.session.id,
    toolCalls: tools.toolCalls,
    formConfig: tools.formConfig,
  };
}
