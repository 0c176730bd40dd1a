import { z } from 'zod';
import { headerCredential, idParam, singleLineText, timestamp } from './common.ts';

export const endpointTypeSchema = z.enum(['flow', 'openai', 'messages', 'generation', 'generic']);
export const slugSchema = z.string().regex(/^[a-z0-9](?:[a-z0-9-]{1,62}[a-z0-9])$/, 'must be 3-64 characters: lowercase letters, digits and inner hyphens');
/**
 * An origin allowed to embed the hosted chat page: `https://example.com`, `http://localhost:8080`, or a
 * subdomain wildcard `https://*.example.com`. Nothing else (no path, no spaces or semicolons): the value goes
 * into a Content-Security-Policy header as it is.
 */
export const embedOriginSchema = z
  .string()
  .max(253)
  .transform((v) => v.trim().toLowerCase().replace(/\/$/, ''))
  .pipe(
    z
      .string()
      .regex(
        /^https?:\/\/(\*\.)?[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*(?::\d{1,5})?$/,
        'must be an origin such as https://example.com or https://*.example.com (scheme, host, optional port; no path)',
      ),
  );
const color = z.string().regex(/^#[0-9a-fA-F]{6}$/, 'must be a #rrggbb colour');
const endpointUrl = z.url({ protocol: /^https?$/, error: 'must be an http(s) URL' }).max(2048);

export const chatInterfaceSchema = z
  .object({
    id: z.string(),
    name: z.string(),
    slug: z.string(),
    configId: z.string().nullable().meta({ description: 'Knowledge base configuration answering this interface' }),
    endpointUrl: z.string().nullable().meta({ description: 'External AI endpoint; when set it answers instead of the knowledge base' }),
    endpointType: endpointTypeSchema.nullable().meta({ description: 'Owner override of the detected endpoint type; null = detect from the URL' }),
    hasApiKey: z.boolean().meta({ description: 'Whether an upstream API key is stored (it is never returned)' }),
    welcomeMessage: z.string().nullable(),
    placeholder: z.string().nullable(),
    primaryColor: z.string().nullable(),
    avatarUrl: z.string().nullable(),
    public: z.boolean().meta({ description: 'Open to anonymous visitors through the hosted page /c/{slug} and the widget' }),
    allowedOrigins: z.array(z.string()).meta({ description: 'Sites allowed to embed the hosted page (CSP frame-ancestors)' }),
    createdAt: timestamp,
    updatedAt: timestamp,
  })
  .meta({ id: 'ChatInterface' });

const editable = {
  name: singleLineText(100).meta({ description: 'One line: it is shown in the subject of support and booking mails' }),
  slug: slugSchema,
  configId: z.string().min(1).max(100).nullable(),
  endpointUrl: endpointUrl.nullable(),
  apiKey: headerCredential(4096).nullable().meta({ description: 'Upstream API key; stored encrypted, never returned; null clears it' }),
  endpointType: endpointTypeSchema.nullable(),
  welcomeMessage: z.string().max(2000).nullable(),
  placeholder: z.string().max(200).nullable(),
  primaryColor: color.nullable(),
  public: z.boolean().meta({ description: 'Open to anonymous visitors (hosted page and widget)' }),
  allowedOrigins: z
    .array(embedOriginSchema)
    .max(50)
    .meta({ description: 'Origins allowed to embed the hosted page, e.g. https://example.com; empty: it can only be opened directly' }),
};

export const createChatInterfaceInput = z.object({
  ...editable,
  slug: editable.slug.optional(),
  configId: editable.configId.optional(),
  endpointUrl: editable.endpointUrl.optional(),
  apiKey: editable.apiKey.optional(),
  endpointType: editable.endpointType.optional(),
  welcomeMessage: editable.welcomeMessage.optional(),
  placeholder: editable.placeholder.optional(),
  primaryColor: editable.primaryColor.optional(),
  public: editable.public.optional(),
  allowedOrigins: editable.allowedOrigins.optional(),
});

export const updateChatInterfaceInput = z.object({
  id: idParam,
  ...Object.fromEntries(Object.entries(editable).map(([k, v]) => [k, v.optional()])),
} as { id: typeof idParam } & { [K in keyof typeof editable]: z.ZodOptional<(typeof editable)[K]> });
