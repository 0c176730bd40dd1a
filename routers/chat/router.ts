import { z } from 'zod';
import { AppError } from '../../schema/errors.ts';
import { chatMessageSchema, chatRequestSchema, chatResponseSchema, sessionIdSchema } from '../../schema/chat.ts';
import type { AppDeps, Context } from '../context.ts';
import { apiKeyProcedure, ownerOrKeyProcedure, ownerProcedure, router } from '../trpc.ts';
import { findConfig } from '../knowledge-base/repository.ts';
import type { Caller, KeyInterface } from '../auth/caller.ts';
import * as repo from './repository.ts';
import { runChatBackend, streamChatBackend, type ChatBackendInput } from './backend.ts';
import { selectToolCalls } from './tools.ts';

const tags = ['Chat'];
const sessionNotFound = () => new AppError('NOT_FOUND', 'Session not found');
/** History carried to an external endpoint when no knowledge-base memory setting applies. */
const DEFAULT_HISTORY = 10;

interface PreparedChat {
  backend: ChatBackendInput;
  session: { id: string; chatInterfaceId: string; ownerId: string; isNew: boolean };
  tools: ReturnType<typeof selectToolCalls>;
}

async function prepareChat(deps: AppDeps, key: { chatInterfaceId: string; chatInterface?: KeyInterface }, input: z.infer<typeof chatRequestSchema>, signal?: AbortSignal): Promise<PreparedChat> {
  const db = deps.database.db;
  // The key's own interface came with the key; only a mismatched slug needs a lookup (to tell 403 from 404).
  const iface = key.chatInterface?.slug === input.slug ? key.chatInterface : await repo.findInterfaceBySlug(db, input.slug);
  if (!iface) throw new AppError('NOT_FOUND', 'Chat interface not found');
  if (iface.id !== key.chatInterfaceId) throw new AppError('FORBIDDEN', 'This API key belongs to another chat interface');
  let isNew = true;
  let sessionId = repo.newSessionId();
  if (input.sessionId) {
    const existing = await repo.findSession(db, input.sessionId);
    // A session belongs to one interface: another interface's id is as unknown as a made-up one.
    if (!existing || existing.chat_interface_id !== iface.id) throw sessionNotFound();
    isNew = false;
    sessionId = existing.id;
  }
  const kb = iface.config_id ? ((await findConfig(db, iface.owner_id, iface.config_id)) ?? null) : null;
  const historyLimit = kb ? (kb.memory_enabled ? kb.memory_max_messages : 0) : DEFAULT_HISTORY;
  const history = isNew ? [] : (await repo.recentMessages(db, sessionId, historyLimit)).map((m) => ({ role: m.role === 'user' ? ('user' as const) : ('assistant' as const), content: m.content }));
  return {
    backend: {
      endpoint: iface.endpoint_url ? { url: iface.endpoint_url, type: iface.endpoint_type as never, apiKeyEnc: iface.endpoint_api_key_enc } : null,
      kb,
      message: input.message,
      sessionId,
      history,
      signal,
    },
    session: { id: sessionId, chatInterfaceId: iface.id, ownerId: iface.owner_id, isNew },
    tools: selectToolCalls(input.message, kb?.tools ?? []),
  };
}

async function record(deps: AppDeps, prepared: PreparedChat, reply: { text: string; sources: unknown[]; usage: unknown }) {
  const { webhooksQueued } = await repo.recordExchange(deps.database.db, prepared.session, {
    message: prepared.backend.message,
    reply: reply.text,
    sources: reply.sources,
    usage: reply.usage,
    toolCalls: prepared.tools.toolCalls,
  });
  if (webhooksQueued > 0) deps.webhookJobs.notify();
}

async function* streamChat(ctx: Context, prepared: PreparedChat) {
  for await (const event of streamChatBackend(ctx.deps, prepared.backend)) {
    if (event.type === 'delta') {
      yield { type: 'delta' as const, text: event.text };
      continue;
    }
    await record(ctx.deps, prepared, event.reply);
    yield {
      type: 'complete' as const,
      success: true,
      message: event.reply.text,
      sources: event.reply.sources,
      usage: event.reply.usage,
      sessionId: prepared.session.id,
      toolCalls: prepared.tools.toolCalls,
      formConfig: prepared.tools.formConfig,
    };
  }
}

/** Which sessions a caller may read: an owner those of their interfaces, a key those of its interface. */
async function readableSession(deps: AppDeps, caller: Caller, sessionId: string) {
  const session = await repo.findSession(deps.database.db, sessionId);
  if (!session) throw sessionNotFound();
  if (caller.kind === 'owner' && session.owner_id === caller.owner.id) return session;
  if (caller.kind === 'apiKey' && session.chat_interface_id === caller.chatInterfaceId) return session;
  throw sessionNotFound();
}

export const chatRouter = router({
  send: apiKeyProcedure
    .meta({
      openapi: {
        method: 'POST',
        path: '/api/v1/chat/{slug}',
        tags,
        summary: "A visitor's message to a chat interface (API key of that interface)",
        description:
          'Answered by the interface\'s external endpoint when one is configured, else by its knowledge base. ' +
          'With `Accept: text/event-stream` the reply streams as SSE: `{"type":"delta","text"}` events, then `{"type":"complete", ...the response fields}`, then `data: [DONE]`.',
        protect: true,
        errorResponses: { 502: 'The external endpoint could not be reached or answered in an invalid format', 503: 'The interface has no backend configured, or its language model failed', 504: 'The external endpoint took longer than the timeout (30 s)' },
      },
      flat: true,
      rateLimit: 'chat',
      sse: true,
    })
    .input(chatRequestSchema)
    .output(chatResponseSchema.or(z.custom<AsyncIterable<unknown>>((v) => typeof v === 'object' && v !== null && Symbol.asyncIterator in v).meta({ override: { type: 'string', description: 'text/event-stream (with Accept: text/event-stream)' } })))
    .mutation(async ({ ctx, input }) => {
      const prepared = await prepareChat(ctx.deps, ctx.apiKey, input, ctx.signal);
      if (ctx.acceptsEventStream) return streamChat(ctx, prepared);
      const reply = await runChatBackend(ctx.deps, prepared.backend);
      await record(ctx.deps, prepared, reply);
      return {
        message: reply.text,
        sources: reply.sources,
        usage: reply.usage,
        sessionId: prepared.session.id,
        toolCalls: prepared.tools.toolCalls,
        formConfig: prepared.tools.formConfig,
      };
    }),

  history: ownerOrKeyProcedure
    .meta({ openapi: { method: 'GET', path: '/api/v1/chat-messages/history', tags, summary: 'The messages of a session, oldest first (owner session or the interface\'s API key)', protect: true } })
    .input(z.object({ sessionId: sessionIdSchema, limit: z.coerce.number().int().min(1).max(500).default(100).meta({ description: 'The newest this many messages' }) }))
    .output(z.object({ sessionId: z.string(), chatInterfaceId: z.string(), messages: z.array(chatMessageSchema), count: z.number().int(), hasMore: z.boolean() }))
    .query(async ({ ctx, input }) => {
      const session = await readableSession(ctx.deps, ctx.caller, input.sessionId);
      const rows = await repo.listMessages(ctx.deps.database.db, session.id, input.limit + 1);
      const hasMore = rows.length > input.limit;
      const page = rows.slice(0, input.limit).reverse();
      return { sessionId: session.id, chatInterfaceId: session.chat_interface_id, messages: page.map(repo.toChatMessage), count: page.length, hasMore };
    }),

  addMessage: ownerProcedure
    .meta({ openapi: { method: 'POST', path: '/api/v1/chat-messages', tags, summary: 'Add a message to one of your sessions (e.g. an operator reply)', protect: true }, successStatus: 201 })
    .input(z.object({ sessionId: sessionIdSchema, message: z.string().trim().min(1).max(4000), role: z.enum(['operator', 'assistant']).default('operator') }))
    .output(z.object({ message: chatMessageSchema }))
    .mutation(async ({ ctx, input }) => {
      const session = await readableSession(ctx.deps, { kind: 'owner', owner: ctx.owner, sessionId: ctx.sessionId }, input.sessionId);
      const { rows, webhooksQueued } = await repo.appendMessages(ctx.deps.database.db, { id: session.id, chatInterfaceId: session.chat_interface_id, ownerId: session.owner_id, isNew: false }, [{ role: input.role, content: input.message }]);
      if (webhooksQueued > 0) ctx.deps.webhookJobs.notify();
      return { message: repo.toChatMessage(rows[0]!) };
    }),
});
