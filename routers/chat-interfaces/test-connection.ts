import { z } from 'zod';
import { AppError } from '../../schema/errors.ts';
import { toStorable } from '../../schema/text-input.ts';
import { idParam, isUuid } from '../../schema/common.ts';
import { endpointTypeSchema } from '../../schema/chat-interfaces.ts';
import { ownerProcedure } from '../trpc.ts';
import { callEndpoint } from '../../adapters/outbound/ai/connector/connector.ts';
import { detectEndpointType } from '../../adapters/outbound/ai/connector/detect.ts';
import { AiUpstreamError } from '../../adapters/outbound/ai/core/upstream-error.ts';
import { findOwnedInterface } from './repository.ts';

const TEST_MESSAGE = 'Hello! This is a test message from the Test Connection button. Please reply briefly.';

/**
 * Test Connection: sends a test message to the saved endpoint, or to an unsaved endpointUrl/apiKey the owner
 * is about to save, and reports exactly what happened. A failing endpoint is a successful test (200) whose
 * report says why; only a bad request or someone else's interface is an error.
 */
export const testConnectionProcedure = ownerProcedure
  .meta({
    openapi: {
      method: 'POST',
      path: '/api/v1/chat-interfaces/{id}/test-connection',
      tags: ['Chat interfaces'],
      summary: 'Send a test message to the external endpoint (saved, or given unsaved) and report what came back',
      protect: true,
    },
  })
  .input(
    z.object({
      id: idParam,
      endpointUrl: z
        .url({ protocol: /^https?$/, error: 'must be an http(s) URL' })
        .max(2048)
        .optional(),
      apiKey: z.string().min(1).max(4096).optional(),
      endpointType: endpointTypeSchema.optional(),
      message: z.string().trim().min(1).max(1000).optional(),
    }),
  )
  .output(
    z.object({
      ok: z.boolean(),
      endpointHost: z.string(),
      detectedType: endpointTypeSchema,
      usedType: endpointTypeSchema,
      typeSource: z.enum(['override', 'detected']),
      authAccepted: z.boolean().nullable().meta({ description: 'false when the endpoint refused the key (401/403); null when it could not be told' }),
      formatRecognized: z.boolean().nullable(),
      status: z.number().int().nullable(),
      reply: z.string().nullable().meta({ description: 'The text the endpoint answered, as plain text' }),
      latencyMs: z.number(),
      error: z.object({ kind: z.string(), message: z.string(), detail: z.string().nullable() }).nullable(),
    }),
  )
  .mutation(async ({ ctx, input }) => {
    const iface = isUuid(input.id) ? await findOwnedInterface(ctx.deps.database.db, ctx.owner.id, input.id) : undefined;
    if (!iface) throw new AppError('NOT_FOUND', 'Chat interface not found');
    const endpointUrl = input.endpointUrl ?? iface.endpoint_url;
    if (!endpointUrl) throw new AppError('VALIDATION_FAILED', 'No endpoint to test', 'endpointUrl: give one, or save one on the chat interface first');
    const apiKey =
      input.apiKey ?? (input.endpointUrl === undefined && iface.endpoint_api_key_enc ? ctx.deps.secrets.open(iface.endpoint_api_key_enc) : undefined);
    const override =
      input.endpointType ?? (input.endpointUrl === undefined ? (iface.endpoint_type as z.infer<typeof endpointTypeSchema> | null) : null) ?? undefined;
    const detectedType = detectEndpointType(endpointUrl);
    const base = {
      endpointHost: new URL(endpointUrl).host,
      detectedType,
      usedType: override ?? detectedType,
      typeSource: override ? ('override' as const) : ('detected' as const),
    };
    const t0 = performance.now();
    try {
      const reply = await callEndpoint(ctx.deps.http, {
        endpointUrl,
        apiKey,
        type: override,
        message: input.message ?? TEST_MESSAGE,
        sessionId: `test_${Date.now()}`,
        timeoutMs: ctx.deps.config.OUTBOUND_TIMEOUT_MS,
        signal: ctx.signal,
      });
      return {
        ...base,
        ok: true,
        authAccepted: true,
        formatRecognized: true,
        status: reply.status,
        reply: toStorable(reply.text),
        latencyMs: reply.latencyMs,
        error: null,
      };
    } catch (error) {
      // The owner's own endpoint: the report keeps the upstream's excerpt (`detail`), which a visitor never sees.
      if (!(error instanceof AiUpstreamError)) throw error;
      const reached = error.status !== undefined;
      return {
        ...base,
        ok: false,
        authAccepted: error.kind === 'auth_failed' ? false : reached && error.kind === 'invalid_response' ? true : null,
        formatRecognized: error.kind === 'invalid_response' ? false : null,
        status: error.status ?? null,
        reply: null,
        latencyMs: Math.round(performance.now() - t0),
        error: { kind: error.kind, message: error.message, detail: error.detail ?? null },
      };
    }
  });
