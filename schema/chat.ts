import { z } from 'zod';
import { timestamp } from './common.ts';
import { sourceSchema, usageSchema } from './knowledge-base.ts';

export const sessionIdSchema = z.string().regex(/^[A-Za-z0-9_-]{1,100}$/, 'must be 1-100 letters, digits, _ or -');

export const chatRequestSchema = z.object({
  slug: z.string().min(1).max(100),
  message: z.string().trim().min(1, 'must not be empty').max(4000, 'at most 4000 characters'),
  sessionId: sessionIdSchema.optional().meta({ description: 'Continue this conversation; omit to start a new one' }),
});

export const toolCallSchema = z
  .object({
    name: z.string(),
    arguments: z.record(z.string(), z.unknown()),
    result: z.unknown().optional().meta({ description: 'A tool the model called: what it returned' }),
    error: z.string().optional().meta({ description: 'A tool the model called: why it failed (the model was told too)' }),
  })
  .meta({ id: 'ToolCall' });

export const chatResponseSchema = z
  .object({
    message: z.string().meta({ description: 'The reply, as plain text' }),
    sources: z.array(sourceSchema),
    usage: usageSchema,
    sessionId: z.string(),
    toolCalls: z.array(toolCallSchema),
    formConfig: z
      .record(z.string(), z.unknown())
      .meta({ description: 'A form for the widget to show (lead capture); an empty object when there is none (the spec types it as an object)' }),
  })
  .meta({ id: 'ChatMessageResponse' });

export const chatMessageSchema = z
  .object({
    id: z.string(),
    role: z.enum(['user', 'assistant', 'operator']),
    content: z.string(),
    sources: z.array(z.unknown()),
    usage: usageSchema.nullable(),
    toolCalls: z.array(z.unknown()),
    createdAt: timestamp,
  })
  .meta({ id: 'ChatMessage' });
