import { randomBytes, randomUUID } from 'node:crypto';
import { z } from 'zod';
import { isUuid, namesNothing } from '../../schema/common.ts';
import { AppError } from '../../schema/errors.ts';
import { confirmRequesterInput, contactInput, listTicketsInput, ticketMessageSchema, ticketSchema, updateTicketInput } from '../../schema/support.ts';
import type { TicketStatus } from '../../db/types.ts';
import * as chatRepo from '../chat/repository.ts';
import { findOwnerById } from '../auth/repository.ts';
import { findPublicInterface, findPublicInterfaceById } from '../visitors/repository.ts';
import type { Context } from '../context.ts';
import { decodeCursor, encodeCursor } from '../pagination.ts';
import { enforceSharedBudget, ownerProcedure, publicProcedure, router } from '../trpc.ts';
import { webhookEvent, withEvents } from '../webhooks/outbox.ts';
import { sha256Hex } from '../../adapters/outbound/secrets.ts';
import { confirmTokenOf, repliesAreMailed } from './confirmation.ts';
import { queueSupportMail } from './mail.ts';
import * as repo from './repository.ts';

const tags = ['Support'];
/** The conversation attached to a hand-off: its last messages, each cut to a readable length. */
const TRANSCRIPT_MESSAGES = 50;

/** Allowed status changes; a reply to an open ticket makes it pending (waiting for the requester). */
const TRANSITIONS: Record<TicketStatus, TicketStatus[]> = {
  open: ['pending', 'resolved', 'closed'],
  pending: ['open', 'resolved', 'closed'],
  resolved: ['open', 'closed'],
  closed: ['open'],
};

const ticketNotFound = () => new AppError('NOT_FOUND', 'Ticket not found');
const replyMail = (ticket: repo.TicketRow, body: string) => ({
  to: [ticket.requester_email],
  subject: `[${ticket.reference}] Re: ${ticket.subject}`,
  text: body,
});
const newReference = () => `T-${randomBytes(5).toString('hex').toUpperCase()}`;

export function toTicket(row: repo.TicketRow) {
  return {
    id: row.id,
    reference: row.reference,
    status: row.status,
    priority: row.priority,
    assignee: row.assignee,
    subject: row.subject,
    category: row.category,
    requester: { name: row.requester_name, email: row.requester_email, confirmed: row.requester_confirmed_at !== null },
    chatInterfaceId: row.chat_interface_id,
    sessionId: row.session_id,
    addressedTo: row.owner_id ? ('owner' as const) : ('admins' as const),
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
  };
}

const viewerOf = (ctx: { owner: { id: string; role: string } }) => ({ ownerId: ctx.owner.id, admin: ctx.owner.role === 'admin' });

/**
 * The conversation to attach, only when the caller proves it is that conversation's visitor (its visitor token, as
 * the visitor endpoints ask): session ids can be guessed (API-key clients choose their own). Without the proof, or
 * for a session that does not exist, the ticket is made without one, answered alike, so the form tells nobody
 * which sessions exist.
 */
async function transcriptOf(ctx: Pick<Context, 'deps' | 'getCaller'>, chatInterfaceId: string, sessionId: string | undefined) {
  if (!sessionId) return null;
  const caller = await ctx.getCaller();
  if (caller.kind !== 'visitor' || caller.chatInterfaceId !== chatInterfaceId) return null;
  const session = await chatRepo.findSession(ctx.deps.database.db, sessionId);
  if (!session || session.chat_interface_id !== chatInterfaceId || session.visitor_id !== caller.visitorId) return null;
  const messages = await chatRepo.listMessages(ctx.deps.database.db, sessionId, TRANSCRIPT_MESSAGES);
  // Newest first from the repository; the transcript reads oldest first.
  return [...messages].reverse().map((m) => ({ role: m.role, content: m.content.slice(0, 4000), createdAt: m.created_at.toISOString() }));
}

export const supportRouter = router({
  contact: publicProcedure
    .meta({
      openapi: {
        method: 'POST',
        path: '/api/v1/support/contact',
        tags,
        summary: 'Writes to support: to the service’s admins, or with chatInterfaceId to that interface’s owner (a hand-off, with the conversation)',
        description:
          'Answers 202 with the ticket reference; the requester gets a confirmation mail (the reference and fixed text only: the address is not verified; for a hand-off, a link that confirms the address, after which replies are mailed), the recipient a notification. The conversation named by sessionId is attached only when the call carries a visitor token of that conversation (Authorization: Bearer); otherwise the ticket has none. Limited per client IP (RATE_LIMIT_SUPPORT) and for everyone together (RATE_LIMIT_SUPPORT_GLOBAL).',
        errorResponses: { NOT_FOUND: 'No public chat interface has this id or slug' },
      },
      successStatus: 202,
      rateLimit: 'support',
    })
    .input(contactInput)
    .output(z.object({ ticket: z.object({ reference: z.string(), status: z.literal('open') }) }))
    .mutation(async ({ ctx, input }) => {
      await enforceSharedBudget(ctx, 'support-contact', ctx.deps.config.RATE_LIMIT_SUPPORT_GLOBAL);
      // A bot that filled the hidden field is told what a person is told, and nothing is stored or sent.
      if (input.website) {
        ctx.deps.logger.info('support contact honeypot hit', { requestId: ctx.requestId });
        ctx.deps.securityEvents.record('honeypot_hit', { ip: ctx.clientIp, detail: { emailDomain: input.email.split('@').at(-1)!.toLowerCase() } });
        return { ticket: { reference: newReference(), status: 'open' as const } };
      }
      const db = ctx.deps.database.db;
      const iface = input.chatInterfaceId
        ? namesNothing(input.chatInterfaceId)
          ? undefined
          : await findPublicInterfaceById(db, input.chatInterfaceId)
        : input.slug
          ? await findPublicInterface(db, input.slug)
          : undefined;
      if ((input.chatInterfaceId || input.slug) && !iface) throw new AppError('NOT_FOUND', 'Chat interface not found');
      const transcript = iface ? await transcriptOf(ctx, iface.id, input.sessionId) : null;
      const owner = iface ? await findOwnerById(db, iface.owner_id) : undefined;
      const recipients = owner ? [owner.email] : await repo.adminEmails(db);
      const reference = newReference();
      const row = await withEvents(
        ctx.deps,
        async (trx) => {
          const id = randomUUID();
          const ticket = await repo.insertTicket(
            trx,
            {
              id,
              reference,
              owner_id: iface?.owner_id ?? null,
              chat_interface_id: iface?.id ?? null,
              session_id: transcript ? (input.sessionId ?? null) : null,
              transcript,
              requester_name: input.name,
              requester_email: input.email,
              subject: input.subject,
              category: input.category ?? null,
              status: 'open',
              priority: 'normal',
              confirm_token_hash: iface ? sha256Hex(confirmTokenOf(ctx.deps, id)) : null,
            },
            { id: randomUUID(), body: input.message },
          );
          // Anyone may type anyone's address here, so the confirmation carries none of the sender's text (name,
          // subject, message): the form would otherwise mail their words to a stranger from our address.
          await queueSupportMail(ctx.deps, trx, {
            to: [input.email],
            subject: `[${reference}] We received your message`,
            confirmation: { reference, handOffTicketId: ticket.owner_id ? ticket.id : null },
          });
          await queueSupportMail(ctx.deps, trx, {
            to: recipients,
            subject: `[${reference}] New ${iface ? `hand-off from ${iface.name}` : 'support request'}: ${input.subject}`,
            text: `From: ${input.name} <${input.email}>\n${input.category ? `Category: ${input.category}\n` : ''}${transcript ? `Conversation attached (${transcript.length} messages)\n` : ''}\n${input.message}`,
            replyTo: input.email,
          });
          return ticket;
        },
        (ticket) => (ticket.owner_id ? [webhookEvent(ticket.owner_id, 'support_ticket.created', toTicket(ticket))] : []),
      );
      ctx.deps.mailJobs.notify();
      return { ticket: { reference: row.reference, status: 'open' as const } };
    }),

  confirmRequester: publicProcedure
    .meta({
      openapi: {
        method: 'POST',
        path: '/api/v1/support/confirm',
        tags,
        summary: 'The requester of a hand-off proves the address with the token of the link in their confirmation mail (addition; public). Idempotent',
        description:
          'The page at /support/confirm calls this with the token from its URL fragment. Replies written before are mailed now, in order; later ones as they are written.',
        errorResponses: { NOT_FOUND: 'No ticket has this token' },
      },
    })
    .input(confirmRequesterInput)
    .output(z.object({ ticket: z.object({ reference: z.string(), confirmed: z.literal(true) }) }))
    .mutation(async ({ ctx, input }) => {
      const confirmed = await withEvents(
        ctx.deps,
        async (trx) => {
          const found = await repo.confirmRequester(trx, sha256Hex(input.token), new Date());
          if (!found) throw ticketNotFound();
          if (found.confirmedNow) {
            const waiting = (await repo.listMessages(trx, found.ticket.id)).filter((m) => m.author !== 'requester');
            for (const reply of waiting) await queueSupportMail(ctx.deps, trx, replyMail(found.ticket, reply.body));
          }
          return found;
        },
        ({ ticket, confirmedNow }) => (confirmedNow && ticket.owner_id ? [webhookEvent(ticket.owner_id, 'support_ticket.updated', toTicket(ticket))] : []),
      );
      ctx.deps.mailJobs.notify();
      return { ticket: { reference: confirmed.ticket.reference, confirmed: true as const } };
    }),

  list: ownerProcedure
    .meta({
      openapi: {
        method: 'GET',
        path: '/api/v1/support/tickets',
        tags,
        summary: 'Tickets addressed to you (every ticket for admins), newest first, paginated',
        protect: true,
      },
    })
    .input(listTicketsInput)
    .output(z.object({ tickets: z.array(ticketSchema), nextCursor: z.string().nullable(), hasMore: z.boolean() }))
    .query(async ({ ctx, input }) => {
      const after = input.cursor ? decodeCursor(input.cursor) : undefined;
      const rows = await repo.listTickets(ctx.deps.database.db, viewerOf(ctx), { status: input.status, limit: input.limit, ...(after ? { after } : {}) });
      const page = rows.slice(0, input.limit).map(toTicket);
      const hasMore = rows.length > input.limit;
      const last = page.at(-1);
      return { tickets: page, hasMore, nextCursor: hasMore && last ? encodeCursor(last.createdAt, last.id) : null };
    }),

  get: ownerProcedure
    .meta({
      openapi: {
        method: 'GET',
        path: '/api/v1/support/tickets/{ticketId}',
        tags,
        summary: 'A ticket with its messages and any attached conversation',
        protect: true,
      },
    })
    .input(z.object({ ticketId: z.string().min(1).max(100) }))
    .output(
      z.object({
        ticket: ticketSchema,
        messages: z.array(ticketMessageSchema),
        transcript: z.array(z.object({ role: z.string(), content: z.string(), createdAt: z.string() })).nullable(),
      }),
    )
    .query(async ({ ctx, input }) => {
      const row = await visibleTicket(ctx, input.ticketId);
      const messages = await repo.listMessages(ctx.deps.database.db, row.id);
      return {
        ticket: toTicket(row),
        messages: messages.map((m) => ({ id: m.id, author: m.author, body: m.body, createdAt: m.created_at.toISOString() })),
        transcript: (row.transcript as Array<{ role: string; content: string; createdAt: string }> | null) ?? null,
      };
    }),

  update: ownerProcedure
    .meta({
      openapi: {
        method: 'PATCH',
        path: '/api/v1/support/tickets/{ticketId}',
        tags,
        summary: 'Replies (mailed to the requester) and moves the ticket along its statuses; admins also set priority and assignee',
        description:
          'open → pending, resolved, closed; pending → open, resolved, closed; resolved → open, closed; closed → open (reopen). Emits `support_ticket.updated`.',
        protect: true,
        errorResponses: { FORBIDDEN: 'Priority and assignee are for admins', CONFLICT: 'That status change is not allowed from the current status' },
      },
    })
    .input(updateTicketInput)
    .output(z.object({ ticket: ticketSchema }))
    .mutation(async ({ ctx, input }) => {
      const viewer = viewerOf(ctx);
      if ((input.priority !== undefined || input.assignee !== undefined) && !viewer.admin) {
        throw new AppError('FORBIDDEN', 'Priority and assignee are set by admins');
      }
      if (!isUuid(input.ticketId)) throw ticketNotFound();
      const row = await withEvents(
        ctx.deps,
        async (trx) => {
          // Read, check and write under the ticket's row lock: a change sent at the same time as this one waits, then
          // checks its move against the status this one left (closed then pending is a 409 together too, as one after
          // the other). A refusal here rolls back: nothing written, no event.
          const current = await repo.lockTicket(trx, viewer, input.ticketId);
          if (!current) throw ticketNotFound();
          const status = input.status ?? (input.reply && current.status === 'open' ? 'pending' : undefined);
          if (status && status !== current.status && !TRANSITIONS[current.status].includes(status)) {
            throw new AppError('CONFLICT', 'Status change not allowed', `A ${current.status} ticket can become ${TRANSITIONS[current.status].join(', ')}`);
          }
          const author = current.owner_id === ctx.owner.id ? ('owner' as const) : ('admin' as const);
          const updated = await repo.updateTicket(
            trx,
            current.id,
            {
              ...(status && status !== current.status ? { status } : {}),
              ...(input.priority ? { priority: input.priority } : {}),
              ...(input.assignee !== undefined ? { assignee: input.assignee } : {}),
            },
            input.reply ? { id: randomUUID(), author, authorId: ctx.owner.id, body: input.reply } : undefined,
          );
          // A hand-off's requester has not proven the address yet: the reply waits, and goes out on confirmation.
          if (input.reply && repliesAreMailed(current)) await queueSupportMail(ctx.deps, trx, replyMail(current, input.reply));
          return updated;
        },
        (ticket) => (ticket.owner_id ? [webhookEvent(ticket.owner_id, 'support_ticket.updated', toTicket(ticket))] : []),
      );
      ctx.deps.mailJobs.notify();
      return { ticket: toTicket(row) };
    }),
});

async function visibleTicket(ctx: Context & { owner: { id: string; role: string } }, id: string) {
  const row = isUuid(id) ? await repo.findTicket(ctx.deps.database.db, viewerOf(ctx), id) : undefined;
  if (!row) throw ticketNotFound();
  return row;
}
