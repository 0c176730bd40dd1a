import { z } from 'zod';
import { AppError } from '../../schema/errors.ts';
import { chatMessageSchema, chatRequestSchema, chatResponseSchema, sessionIdSchema } from '../../schema/chat.ts';
import { queryInt } from '../../schema/common.ts';
import type { AppDeps } from '../context.ts';
import { apiKeyProcedure, ownerOrKeyProcedure, ownerProcedure, router } from '../trpc.ts';
import type { Caller } from '../auth/principal.ts';
import * as repo from './repository.ts';
import { answerChat, prepareChat, streamChat } from './turn.ts';

const tags = ['Chat'];
/** Every 502 code routers/ai-errors.ts gives an upstream's failure, under one text. */
const upstreamFailed =
  "The external endpoint, or the knowledge base's language model or embedding provider, " + 'could not be reached, failed or answered in an invalid format';
const sessionNotFound = () => new AppError('NOT_FOUND', 'Session not found');

/** Which sessions a caller may read: an owner those of their interfaces, a key those of its interface. */
async function readableSession(deps: Pick<AppDeps, 'database'>, caller: Caller, sessionId: string) {
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
          "Answered by the interface's external endpoint when one is configured, else by its knowledge base. " +
          'With `Accept: text/event-stream` the reply streams as SSE: `{"type":"delta","text"}` events, ' +
          'then `{"type":"complete", ...the response fields}`, then `data: [DONE]`.',
        protect: true,
        errorResponses: {
          UPSTREAM_CONNECTION_FAILED: upstreamFailed,
          UPSTREAM_INVALID_RESPONSE: upstreamFailed,
          UPSTREAM_ERROR: upstreamFailed,
          SERVICE_UNAVAILABLE: 'The interface has no backend configured',
          UPSTREAM_TIMEOUT: 'The external endpoint took longer than the timeout (30 s)',
        },
      },
      flat: true,
      rateLimit: 'chat',
      sse: true,
    })
    .input(chatRequestSchema)
    .output(
      chatResponseSchema.or(
        z
          .custom<AsyncIterable<unknown>>((v) => typeof v === 'object' && v !== null && Symbol.asyncIterator in v)
          .meta({ override: { type: 'string', description: 'text/event-stream (with Accept: text/event-stream)' } }),
      ),
    )
    .mutation(async ({ ctx, input }) => {
      const prepared = await prepareChat(
        ctx.deps,
        { kind: 'apiKey', ownerId: ctx.apiKey.ownerId, chatInterfaceId: ctx.apiKey.chatInterfaceId, chatInterface: ctx.apiKey.chatInterface },
        input,
        ctx.requestId,
        ctx.signal,
      );
      return ctx.acceptsEventStream ? streamChat(ctx, prepared) : answerChat(ctx, prepared);
    }),

  history: ownerOrKeyProcedure
    .meta({
      openapi: {
        method: 'GET',
        path: '/api/v1/chat-messages/history',
        tags,
        summary: "The messages of a session, oldest first (owner session or the interface's API key)",
        protect: true,
        errorResponses: { NOT_FOUND: 'No such session for this caller' },
      },
      // The spec's limit for chat endpoints covers its whole "Chat and messaging" group.
      rateLimit: 'chat',
    })
    .input(z.object({ sessionId: sessionIdSchema, limit: queryInt({ min: 1, max: 500 }).default(100).meta({ description: 'The newest this many messages' }) }))
    .output(
      z.object({ sessionId: z.string(), chatInterfaceId: z.string(), messages: z.array(chatMessageSchema), count: z.number().int(), hasMore: z.boolean() }),
    )
    .query(async ({ ctx, input }) => {
      const session = await readableSession(ctx.deps, ctx.caller, input.sessionId);
      return repo.historyPage(ctx.deps.database.db, session, input.limit);
    }),

  addMessage: ownerProcedure
    .meta({
      openapi: {
        method: 'POST',
        path: '/api/v1/chat-messages',
        tags,
        summary: 'Add a message to one of your sessions (e.g. an operator reply)',
        protect: true,
        errorResponses: { NOT_FOUND: 'No such session of yours' },
      },
      successStatus: 201,
      rateLimit: 'chat',
    })
    .input(z.object({ sessionId: sessionIdSchema, message: z.string().trim().min(1).max(4000), role: z.enum(['operator', 'assistant']).default('operator') }))
    .output(z.object({ message: chatMessageSchema }))
    .mutation(async ({ ctx, input }) => {
      const session = await readableSession(ctx.deps, { kind: 'owner', owner: ctx.owner, sessionId: ctx.sessionId }, input.sessionId);
      const { rows, webhooksQueued } = await repo.appendMessages(
        ctx.deps.database.db,
        { id: session.id, chatInterfaceId: session.chat_interface_id, ownerId: session.owner_id, isNew: false },
        [{ role: input.role, content: input.message }],
      );
      if (webhooksQueued > 0) ctx.deps.webhookJobs.notify();
      return { message: repo.toChatMessage(rows[0]!) };
    }),
});
