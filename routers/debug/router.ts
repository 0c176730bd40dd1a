import { z } from 'zod';
import { chatInterfaceSchema } from '../../schema/chat-interfaces.ts';
import { ownerProcedure, router } from '../trpc.ts';
import { countKeysByInterface, listOwnedInterfaces } from '../chat-interfaces/repository.ts';
import { toChatInterface } from '../chat-interfaces/view.ts';

/** Keys shorter than this are masked entirely: showing 7 characters of a 9-character key would all but give it away. */
const MASK_MIN_REVEALING_LENGTH = 20;

/**
 * Shows at most the first 3 and last 4 characters, and only of a key of 20 or more (13 or more stay hidden): enough
 * to recognise it, never enough to use it. The stars are a fixed number, so the key's length is not told either.
 */
export function maskSecret(secret: string): string {
  if (secret === '') return '';
  if (secret.length < MASK_MIN_REVEALING_LENGTH) return '*'.repeat(8);
  return `${secret.slice(0, 3)}${'*'.repeat(16)}${secret.slice(-4)}`;
}

const resolvedSchema = chatInterfaceSchema.extend({
  resolved: z.object({
    backend: z.enum(['external-endpoint', 'knowledge-base', 'unconfigured']),
    endpointHost: z.string().nullable(),
    endpointTypeSource: z.enum(['override', 'detected']).nullable(),
    apiKeyMasked: z.string().nullable(),
    apiKeyReadable: z.boolean().nullable().meta({ description: 'false when the stored key cannot be decrypted (encryption key changed)' }),
    activeApiKeys: z.number().int(),
  }),
});

export const debugRouter = router({
  chatInterfaces: ownerProcedure
    .meta({
      openapi: {
        method: 'GET',
        path: '/api/v1/debug/chat-interfaces',
        tags: ['Debug'],
        summary: "The caller's chat interfaces with their resolved configuration (secrets masked)",
        protect: true,
      },
    })
    .input(z.object({}).optional())
    .output(z.object({ chatInterfaces: z.array(resolvedSchema), count: z.number().int() }))
    .query(async ({ ctx }) => {
      const db = ctx.deps.database.db;
      const [rows, keyCounts] = await Promise.all([listOwnedInterfaces(db, ctx.owner.id), countKeysByInterface(db, ctx.owner.id)]);
      const chatInterfaces = rows.map((row) => {
        let apiKeyMasked: string | null = null;
        let apiKeyReadable: boolean | null = null;
        if (row.endpoint_api_key_enc) {
          try {
            apiKeyMasked = maskSecret(ctx.deps.secrets.open(row.endpoint_api_key_enc));
            apiKeyReadable = true;
          } catch {
            apiKeyReadable = false;
          }
        }
        return {
          ...toChatInterface(row),
          resolved: {
            backend: row.endpoint_url ? ('external-endpoint' as const) : row.config_id ? ('knowledge-base' as const) : ('unconfigured' as const),
            endpointHost: row.endpoint_url ? new URL(row.endpoint_url).host : null,
            endpointTypeSource: row.endpoint_url ? (row.endpoint_type ? ('override' as const) : ('detected' as const)) : null,
            apiKeyMasked,
            apiKeyReadable,
            activeApiKeys: keyCounts.get(row.id) ?? 0,
          },
        };
      });
      return { chatInterfaces, count: chatInterfaces.length };
    }),
});
