import { randomBytes } from 'node:crypto';
import { sha256Hex } from '../../adapters/outbound/secrets.ts';
import { z } from 'zod';
import { chatMessageSchema, chatRequestSchema, chatResponseSchema } from '../../schema/chat.ts';
import { toIso } from '../../schema/common.ts';
import { AppError } from '../../schema/errors.ts';
import { visitorConversationSchema, visitorHistoryInput, visitorSessionInput, visitorSessionSchema } from '../../schema/visitors.ts';
import { publicProcedure, router, visitorProcedure } from '../trpc.ts';
import * as chatRepo from '../chat/repository.ts';
import { answerChat, prepareChat, streamChat } from '../chat/turn.ts';
import { avatarUrlOf, interfaceNotFound, originAllowed, visitorInterface } from './access.ts';
import * as repo from './repository.ts';
import { issueVisitorToken } from './token.ts';

const tags = ['Visitors'];
const RESUME_PREFIX = 'vrt_';
/** Every 502 code routers/ai-errors.ts gives an upstream's failure, under one text. */
const upstreamFailed = 'The external endpoint or the language model failed or answered in an invalid format';
const sessionNotFound = () => new AppError('NOT_FOUND', 'Session not found');

/** A browser page on an origin other than ours (the hosted page's own) must be one the owner allowed. */
function checkOrigin(origin: string | undefined, host: string | undefined, allowed: readonly string[]) {
  if (!origin) return;
  let sameHost = false;
  try {
    sameHost = host !== undefined && new URL(origin).host === host.toLowerCase();
  } catch {
    sameHost = false;
  }
  if (!sameHost && !originAllowed(origin, allowed))
    throw new AppError('FORBIDDEN', 'This site is not allowed to open this chat', `Origin ${origin.slice(0, 200)}`);
}

const visitorChatOutput = chatResponseSchema.or(
  z
    .custom<AsyncIterable<unknown>>((v) => typeof v === 'object' && v !== null && Symbol.asyncIterator in v)
    .meta({ override: { type: 'string', description: 'text/event-stream (with Accept: text/event-stream)' } }),
);

export const visitorsRouter = router({
  start: publicProcedure
    .meta({
      openapi: {
        method: 'POST',
        path: '/api/v1/chat/{slug}/visitor-sessions',
        tags,
        summary: 'A visitor token for a public chat interface (the hosted page and the widget ask for it)',
        description:
          'No credential: the interface must be public. A new visitor (201) gets a resume token, shown once, that the browser keeps; ' +
          'sending it again (200) returns a fresh visitor token for the same visitor and its conversations. The visitor token is ' +
          'short-lived and may only chat with this interface and read its own conversations. A browser page on another site must ' +
          'be on one of the allowed origins.',
        errorResponses: {
          FORBIDDEN: 'The request comes from a site that is not allowed to embed this chat',
          NOT_FOUND: 'No public chat interface has this slug',
        },
      },
      successStatus: 201,
      otherSuccess: { status: 200, description: 'The same visitor, resumed with its resume token' },
      rateLimit: 'visitorSession',
    })
    .input(visitorSessionInput)
    .output(visitorSessionSchema)
    .mutation(async ({ ctx, input }) => {
      const db = ctx.deps.database.db;
      const iface = await repo.findPublicInterface(db, input.slug);
      if (!iface) throw interfaceNotFound();
      checkOrigin(ctx.origin, ctx.host, iface.allowed_origins);
      const resumed = input.resumeToken?.startsWith(RESUME_PREFIX)
        ? await repo.resumeVisitor(db, iface.id, sha256Hex(input.resumeToken), ctx.deps.config.VISITOR_RESUME_IDLE_DAYS)
        : undefined;
      let visitorId = resumed?.id;
      let resumeToken: string | null = null;
      if (!visitorId) {
        resumeToken = `${RESUME_PREFIX}${randomBytes(32).toString('base64url')}`;
        visitorId = await repo.insertVisitor(db, { chatInterfaceId: iface.id, ownerId: iface.owner_id, resumeHash: sha256Hex(resumeToken) });
      } else ctx.response.status = 200;
      const expiresAt = Date.now() + ctx.deps.config.VISITOR_TOKEN_TTL_SECONDS * 1000;
      return {
        token: issueVisitorToken(ctx.deps.secrets, { visitorId, chatInterfaceId: iface.id, expiresAt }),
        expiresAt: new Date(Math.floor(expiresAt / 1000) * 1000).toISOString(),
        visitorId,
        resumeToken,
        interface: {
          slug: iface.slug,
          name: iface.name,
          avatarUrl: avatarUrlOf(iface),
          welcomeMessage: iface.welcome_message,
          placeholder: iface.placeholder,
          primaryColor: iface.primary_color,
        },
      };
    }),

  send: visitorProcedure
    .meta({
      openapi: {
        method: 'POST',
        path: '/api/v1/chat/{slug}/visitor-messages',
        tags,
        summary: "A visitor's message (visitor token); the same answer as POST /api/v1/chat/{slug}",
        description:
          'Answered like the API-key operation: JSON, or with `Accept: text/event-stream` `delta` events, one `complete` event with ' +
          "the response fields, then `data: [DONE]`. A session id must be one of this visitor's own conversations.",
        protect: true,
        errorResponses: {
          NOT_FOUND: 'No public chat interface has this slug, or the session is not one of this visitor',
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
    .output(visitorChatOutput)
    .mutation(async ({ ctx, input }) => {
      const sender = { kind: 'visitor' as const, visitorId: ctx.visitor.visitorId, chatInterfaceId: ctx.visitor.chatInterfaceId };
      const prepared = await prepareChat(ctx.deps, sender, input, ctx.requestId, ctx.signal);
      return ctx.acceptsEventStream ? streamChat(ctx, prepared) : answerChat(ctx, prepared);
    }),

  history: visitorProcedure
    .meta({
      openapi: {
        method: 'GET',
        path: '/api/v1/chat/{slug}/visitor-history',
        tags,
        summary: "The messages of one of the visitor's own conversations, oldest first",
        protect: true,
        errorResponses: { NOT_FOUND: 'No public chat interface has this slug, or the session is not one of this visitor' },
      },
    })
    .input(visitorHistoryInput)
    .output(
      z.object({ sessionId: z.string(), chatInterfaceId: z.string(), messages: z.array(chatMessageSchema), count: z.number().int(), hasMore: z.boolean() }),
    )
    .query(async ({ ctx, input }) => {
      const iface = await visitorInterface(ctx.deps, ctx.visitor, input.slug);
      const session = await chatRepo.findSession(ctx.deps.database.db, input.sessionId);
      // Another visitor's conversation is as unknown as a made-up id.
      if (!session || session.chat_interface_id !== iface.id || session.visitor_id !== ctx.visitor.visitorId) throw sessionNotFound();
      return chatRepo.historyPage(ctx.deps.database.db, session, input.limit);
    }),

  conversations: visitorProcedure
    .meta({
      openapi: {
        method: 'GET',
        path: '/api/v1/chat/{slug}/visitor-conversations',
        tags,
        summary: "The visitor's own conversations with this interface, most recent first (at most 50)",
        protect: true,
        errorResponses: { NOT_FOUND: 'No public chat interface has this slug' },
      },
    })
    .input(z.object({ slug: z.string().min(1).max(100) }))
    .output(z.object({ conversations: z.array(visitorConversationSchema) }))
    .query(async ({ ctx, input }) => {
      const iface = await visitorInterface(ctx.deps, ctx.visitor, input.slug);
      const rows = await repo.listVisitorSessions(ctx.deps.database.db, ctx.visitor.visitorId, iface.id, 50);
      return {
        conversations: rows.map((r) => ({
          sessionId: r.id,
          createdAt: toIso(r.created_at)!,
          lastMessageAt: toIso(r.last_message_at)!,
          preview: r.preview ?? '',
        })),
      };
    }),
});
