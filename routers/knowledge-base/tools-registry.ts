import { z } from 'zod';

/**
 * The tools a knowledge-base assistant may call. A tool exists here with a schema for its owner-set
 * configuration; the chat area makes them callable. Names are validated against this registry.
 */
const leadCaptureConfig = z.object({
  title: z.string().max(200).default('Leave your details and we will get back to you'),
  fields: z
    .array(
      z.object({
        name: z.string().regex(/^[a-zA-Z][a-zA-Z0-9_]{0,39}$/),
        label: z.string().min(1).max(100),
        type: z.enum(['text', 'email', 'tel', 'textarea']),
        required: z.boolean().default(false),
      }),
    )
    .min(1)
    .max(10)
    .default([
      { name: 'name', label: 'Name', type: 'text', required: true },
      { name: 'email', label: 'Email', type: 'email', required: true },
      { name: 'phone', label: 'Phone', type: 'tel', required: false },
    ]),
  submitLabel: z.string().max(50).default('Send'),
});

/**
 * The booking tool refers to the booking hours of the chat interface the visitor talks to (PUT
 * /api/v1/chat-interfaces/{id}/availability): slot length, zone and rules live there, not here.
 */
const bookSlotConfig = z.object({
  slotsOffered: z.number().int().min(1).max(20).default(6).meta({ description: 'How many of the next free slots the chat offers' }),
  daysAhead: z.number().int().min(1).max(62).default(14).meta({ description: 'How far ahead the chat looks for them' }),
});

export const TOOL_REGISTRY = {
  lead_capture: {
    description: "Collects a visitor's contact details through a form (yields a formConfig for the widget)",
    config: leadCaptureConfig,
  },
  book_slot: {
    description: "Offers the next free slots of the chat interface's booking hours and books the one the visitor picks",
    config: bookSlotConfig,
  },
} as const;

export type ToolName = keyof typeof TOOL_REGISTRY;
export const TOOL_NAMES = Object.keys(TOOL_REGISTRY) as ToolName[];

export const toolSettingInput = z.object({
  name: z.enum(TOOL_NAMES as [ToolName, ...ToolName[]]),
  enabled: z.boolean(),
  config: z.record(z.string(), z.unknown()).optional(),
});

/** Validates each tool's configuration against its schema, filling defaults. */
export function normaliseTools(
  tools: Array<z.infer<typeof toolSettingInput>>,
): { ok: true; tools: Array<{ name: ToolName; enabled: boolean; config: Record<string, unknown> }> } | { ok: false; details: string } {
  const seen = new Set<string>();
  const out = [];
  for (const [index, tool] of tools.entries()) {
    if (seen.has(tool.name)) return { ok: false, details: `tools.${index}.name: ${tool.name} is listed twice` };
    seen.add(tool.name);
    const parsed = TOOL_REGISTRY[tool.name].config.safeParse(tool.config ?? {});
    if (!parsed.success) {
      const issue = parsed.error.issues[0]!;
      return { ok: false, details: `tools.${index}.config.${issue.path.join('.')}: ${issue.message}` };
    }
    out.push({ name: tool.name, enabled: tool.enabled, config: parsed.data as Record<string, unknown> });
  }
  return { ok: true, tools: out };
}
