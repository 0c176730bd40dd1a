import { z } from 'zod';
import { idParam, queryInt, singleLineText, timestamp } from './common.ts';
import { sessionIdSchema } from './chat.ts';

export const ticketStatusSchema = z.enum(['open', 'pending', 'resolved', 'closed']);
export const ticketPrioritySchema = z.enum(['low', 'normal', 'high', 'urgent']);

export const contactInput = z.object({
  name: singleLineText(200),
  email: z.email().max(254),
  subject: singleLineText(200).meta({ description: 'One line: it is the subject of the mails about the ticket' }),
  message: z.string().trim().min(1).max(10_000),
  category: z.enum(['general', 'billing', 'technical', 'sales', 'other']).optional(),
  chatInterfaceId: idParam.optional().meta({ description: "A hand-off from this public chat interface's visitor: the ticket goes to its owner" }),
  slug: z.string().min(1).max(100).optional().meta({ description: 'The same as chatInterfaceId, by the public interface’s slug (the widget sends this)' }),
  sessionId: sessionIdSchema
    .optional()
    .meta({ description: 'With chatInterfaceId or slug and a visitor token of this conversation (Authorization: Bearer): the conversation to attach' }),
  website: z.string().max(500).optional().meta({ description: 'Leave empty (a field only bots fill in)' }),
});

export const ticketMessageSchema = z.object({
  id: z.string(),
  author: z.enum(['requester', 'owner', 'admin']),
  body: z.string(),
  createdAt: timestamp,
});

export const ticketSchema = z
  .object({
    id: z.string(),
    reference: z.string(),
    status: ticketStatusSchema,
    priority: ticketPrioritySchema,
    assignee: z.string().nullable(),
    subject: z.string(),
    category: z.string().nullable(),
    requester: z.object({
      name: z.string(),
      email: z.string(),
      confirmed: z.boolean().meta({
        description:
          'Whether the requester proved the address with the link in their confirmation mail. Replies to a hand-off (addressedTo owner) are mailed only once it is; replies to the admins’ tickets always are',
      }),
    }),
    chatInterfaceId: z.string().nullable(),
    sessionId: z.string().nullable(),
    addressedTo: z.enum(['owner', 'admins']),
    createdAt: timestamp,
    updatedAt: timestamp,
  })
  .meta({ id: 'SupportTicket' });

export const listTicketsInput = z.object({
  status: ticketStatusSchema.optional(),
  limit: queryInt({ min: 1, max: 100 }).default(20),
  cursor: z.string().max(200).optional().meta({ description: 'nextCursor of the previous page' }),
});

// In the schema rather than the procedure, so the OpenAPI document knows the body is required.
export const updateTicketInput = z
  .object({
    ticketId: idParam,
    reply: z
      .string()
      .trim()
      .min(1)
      .max(10_000)
      .optional()
      .meta({ description: 'A reply, mailed to the requester (for a hand-off: once the requester has confirmed the address; until then it waits)' }),
    status: ticketStatusSchema.optional(),
    priority: ticketPrioritySchema.optional().meta({ description: 'Admins only' }),
    assignee: z.string().trim().min(1).max(254).nullable().optional().meta({ description: 'Admins only; null unassigns' }),
  })
  .refine((v) => v.reply !== undefined || v.status !== undefined || v.priority !== undefined || v.assignee !== undefined, {
    message: 'give at least one',
    path: ['reply, status, priority or assignee'],
  });

export const confirmRequesterInput = z.object({
  token: z.string().min(10).max(200).meta({ description: 'The token from the link in the confirmation mail (the page at /support/confirm sends it)' }),
});

export const ticketEventSchema = ticketSchema;
