import { z } from 'zod';
import { idParam, timestamp } from './common.ts';

export const apiKeySchema = z
  .object({
    id: z.string(),
    name: z.string(),
    chatInterfaceId: z.string(),
    prefix: z.string().meta({ description: 'The first characters of the key, to tell keys apart' }),
    active: z.boolean(),
    lastUsedAt: timestamp.nullable(),
    createdAt: timestamp,
    updatedAt: timestamp,
  })
  .meta({ id: 'ApiKey' });

export const createApiKeyInput = z.object({ name: z.string().trim().min(1).max(100), chatInterfaceId: idParam });
export const updateApiKeyInput = z
  .object({ id: idParam, name: z.string().trim().min(1).max(100).optional(), active: z.boolean().optional() })
  .refine((v) => v.name !== undefined || v.active !== undefined, { message: 'give name or active', path: ['name'] });
export const createdApiKeySchema = z.object({
  apiKey: apiKeySchema,
  key: z.string().meta({ description: 'The full key (svc_...). Shown only in this response; only its hash is stored.' }),
});
