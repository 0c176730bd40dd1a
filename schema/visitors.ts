import { z } from 'zod';
import { queryInt, timestamp } from './common.ts';
import { sessionIdSchema } from './chat.ts';

/** What a visitor's page shows of the interface: its face, never its settings. */
export const publicInterfaceSchema = z
  .object({
    slug: z.string(),
    name: z.string(),
    avatarUrl: z.string().nullable(),
    welcomeMessage: z.string().nullable(),
    placeholder: z.string().nullable(),
    primaryColor: z.string().nullable(),
  })
  .meta({ id: 'PublicChatInterface' });

export const visitorSessionInput = z.object({
  slug: z.string().min(1).max(100),
  resumeToken: z
    .string()
    .max(200)
    .optional()
    .meta({ description: 'The resume token this browser was given earlier: the same visitor comes back to its conversations' }),
});

export const visitorSessionSchema = z
  .object({
    token: z.string().meta({ description: 'Visitor token (vis_...): send as Authorization: Bearer on the visitor operations' }),
    expiresAt: timestamp,
    visitorId: z.string(),
    resumeToken: z.string().nullable().meta({ description: 'Shown once, to a new visitor (201); keep it to come back; null when resuming (200)' }),
    interface: publicInterfaceSchema,
  })
  .meta({ id: 'VisitorSession' });

export const visitorHistoryInput = z.object({
  slug: z.string().min(1).max(100),
  sessionId: sessionIdSchema,
  limit: queryInt({ min: 1, max: 500 }).default(100).meta({ description: 'The newest this many messages' }),
});

export const visitorConversationSchema = z
  .object({
    sessionId: z.string(),
    createdAt: timestamp,
    lastMessageAt: timestamp,
    preview: z.string().meta({ description: 'The first words of the last message' }),
  })
  .meta({ id: 'VisitorConversation' });

const leadValue = z.string().trim().max(2000);

export const leadSubmitInput = z.object({
  slug: z.string().min(1).max(100),
  sessionId: sessionIdSchema.optional().meta({ description: 'The conversation the form was shown in' }),
  fields: z.record(z.string().regex(/^[a-zA-Z][a-zA-Z0-9_]{0,39}$/, 'must be a form field name'), leadValue).meta({
    description: "The form's values by field name, as the lead-capture tool's formConfig lists them",
  }),
});

export const leadSchema = z
  .object({
    id: z.string(),
    chatInterfaceId: z.string(),
    sessionId: z.string().nullable(),
    visitorId: z.string().nullable(),
    fields: z.record(z.string(), z.string()),
    createdAt: timestamp,
  })
  .meta({ id: 'Lead' });
