import { z } from 'zod';
import { headerCredential, idParam, timestamp } from './common.ts';

export const accountStatusSchema = z.enum(['INITIATED', 'ACTIVE', 'DISABLED', 'EXPIRED', 'FAILED', 'REVOKED']);

export const toolSchema = z.object({
  name: z.string().meta({ description: 'As offered to models: <toolkit>__<tool>' }),
  description: z.string(),
  inputSchema: z.record(z.string(), z.unknown()).meta({ description: 'JSON Schema of the input' }),
});

export const toolkitSchema = z
  .object({
    slug: z.string(),
    name: z.string(),
    description: z.string(),
    authScheme: z.enum(['oauth2', 'api_key', 'none']),
    scopes: z.array(z.string()).meta({ description: 'oauth2: the scopes asked for by default' }),
    settingsSchema: z.record(z.string(), z.unknown()),
    tools: z.array(toolSchema),
  })
  .meta({ id: 'ToolhubToolkit' });

export const authConfigSchema = z
  .object({
    id: z.string().meta({ description: 'A uuid, or platform:<toolkit> for the platform’s own client' }),
    toolkit: z.string(),
    name: z.string(),
    source: z.enum(['owner', 'platform']),
    clientId: z.string(),
    scopes: z.array(z.string()),
    createdAt: timestamp.nullable(),
  })
  .meta({ id: 'ToolhubAuthConfig' });

export const authConfigInput = z.object({
  toolkit: z.string().min(1).max(50),
  name: z.string().trim().min(1).max(100).optional(),
  clientId: z.string().trim().min(1).max(500),
  clientSecret: z.string().min(1).max(2000),
  scopes: z.array(z.string().trim().min(1).max(200)).max(50).optional().meta({ description: "Default: the toolkit's scopes" }),
});

export const authConfigUpdateInput = z.object({
  id: idParam,
  name: z.string().trim().min(1).max(100).optional(),
  clientId: z.string().trim().min(1).max(500).optional(),
  clientSecret: z.string().min(1).max(2000).optional(),
  scopes: z.array(z.string().trim().min(1).max(200)).max(50).optional(),
});

export const accountSchema = z
  .object({
    id: z.string(),
    toolkit: z.string(),
    authConfigId: z.string().nullable(),
    label: z.string().nullable(),
    status: accountStatusSchema,
    statusReason: z.string().nullable(),
    identity: z.string().nullable().meta({ description: 'Who the provider says the credential belongs to, when it says' }),
    scopes: z.array(z.string()),
    settings: z.record(z.string(), z.unknown()),
    createdAt: timestamp,
    updatedAt: timestamp,
  })
  .meta({ id: 'ToolhubAccount' });

export const connectInput = z.object({
  toolkit: z.string().min(1).max(50),
  authConfigId: z
    .string()
    .min(1)
    .max(100)
    .optional()
    .meta({ description: 'oauth2: your auth config, or platform:<toolkit>; default: the platform’s when configured' }),
  apiKey: headerCredential(4000).optional().meta({ description: 'api_key toolkits: the credential, checked with a test call before it is stored' }),
  label: z.string().trim().min(1).max(100).optional(),
  settings: z.record(z.string(), z.unknown()).optional().meta({ description: 'Per-account settings the toolkit defines (see its settingsSchema)' }),
  scopes: z.array(z.string().trim().min(1).max(200)).max(50).optional(),
});

export const connectOutput = z.object({
  account: accountSchema,
  authorizationUrl: z
    .string()
    .nullable()
    .meta({ description: 'oauth2: send the owner here; the provider returns to our callback, which activates the account' }),
  expiresAt: timestamp.nullable().meta({ description: 'oauth2: when the authorization attempt (its state) expires' }),
});

export const accountEventSchema = z.object({ id: z.string(), toolkit: z.string(), status: accountStatusSchema, reason: z.string() });
