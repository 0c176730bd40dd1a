import type { AnyRouter } from '@trpc/server';
import { generateOpenApiDocument } from 'trpc-to-openapi';
import type { AuthRule } from '../../routers/trpc.ts';
import { z } from 'zod';
import { ERROR_CODES } from '../../schema/errors.ts';
import { WEBHOOK_EVENTS } from '../../schema/webhooks.ts';
import { buildRouteTable } from './routes.ts';

const AUTH_LABEL: Record<AuthRule, { code: string; text: string }> = {
  public: { code: 'P', text: 'Public: no authentication' },
  session: { code: 'S', text: 'Owner session token (Authorization: Bearer <token>)' },
  apiKey: { code: 'K', text: 'API key (Authorization: Bearer svc_...)' },
  sessionOrApiKey: { code: 'S or K', text: 'Owner session token or API key' },
  enterprise: { code: 'E', text: 'Session token of an enterprise account' },
  admin: { code: 'A', text: 'Session token of an admin' },
  cron: { code: 'I', text: 'Internal cron secret (Authorization: Bearer <CRON_SECRET>)' },
};

const rateLimitHeaders = {
  'X-RateLimit-Limit': { description: 'Requests allowed in the window', schema: { type: 'integer' } },
  'X-RateLimit-Remaining': { description: 'Requests left in the window', schema: { type: 'integer' } },
  'X-RateLimit-Reset': { description: 'When a request is allowed again (Unix seconds)', schema: { type: 'integer' } },
  'X-Request-Id': { description: 'Request id (also in logs)', schema: { type: 'string' } },
};

const errorRef = (description: string) => ({
  description,
  headers: rateLimitHeaders,
  content: { 'application/json': { schema: { $ref: '#/components/schemas/ErrorEnvelope' } } },
});

/**
 * trpc-to-openapi describes each procedure's raw input/output; this rewrites the responses into what the
 * REST adapter really sends: the v1 envelope (or the flat shape), 201 for creates, and our error envelope
 * with the closed list of codes.
 */
export function buildOpenApiDocument(router: AnyRouter, info: { title: string; version: string; description: string }) {
  const doc = generateOpenApiDocument(router as never, { title: info.title, version: info.version, description: info.description, baseUrl: '/' }) as any;
  const table = buildRouteTable(router);
  doc.servers = [{ url: '/', description: 'This server' }];
  doc.components ??= {};
  doc.components.securitySchemes = { bearerAuth: { type: 'http', scheme: 'bearer', description: 'Owner session token, API key (svc_...) or cron secret, as each operation says' } };
  const schemas = (doc.components.schemas ??= {});
  for (const name of Object.keys(schemas)) if (name.startsWith('error.')) delete schemas[name];
  schemas.ErrorEnvelope = {
    type: 'object',
    required: ['success', 'error'],
    properties: {
      success: { const: false },
      error: {
        type: 'object',
        required: ['message', 'code', 'details'],
        properties: { message: { type: 'string' }, code: { type: 'string', enum: [...ERROR_CODES] }, details: { type: 'string' } },
      },
    },
  };

  for (const route of table.routes) {
    const operation = doc.paths?.[route.path]?.[route.method.toLowerCase()];
    if (!operation) continue;
    const auth = AUTH_LABEL[route.meta.auth ?? 'public'];
    operation['x-auth'] = auth.code;
    operation.description = [operation.description, `Auth: ${auth.text}.`].filter(Boolean).join('\n\n');
    operation.security = route.meta.auth === 'public' ? [] : [{ bearerAuth: [] }];
    const success = operation.responses?.['200'];
    const status = String(route.meta.successStatus ?? 200);
    const data = success?.content?.['application/json']?.schema ?? {};
    const responses: Record<string, unknown> = {};
    if (route.meta.rawResponse) {
      const type = route.meta.openapi?.contentTypes?.[0] ?? 'application/octet-stream';
      responses[status] = { description: 'The file', content: { [type]: { schema: { type: 'string', format: 'binary' } } } };
    } else {
      const schema = route.meta.flat
        ? { allOf: [{ type: 'object', required: ['success'], properties: { success: { const: true } } }, data] }
        : { type: 'object', required: ['success', 'data', 'version'], properties: { success: { const: true }, data, version: { const: 'v1' } } };
      responses[status] = { description: status === '201' ? 'Created' : 'Successful response', headers: rateLimitHeaders, content: { 'application/json': { schema } } };
    }
    responses['400'] = errorRef('Invalid request parameters (details name the field)');
    if (route.meta.auth !== 'public') {
      responses['401'] = errorRef('Authentication missing or invalid');
      responses['403'] = errorRef('Insufficient permissions');
    }
    responses['404'] = errorRef('Not found (also for resources of other owners)');
    if (route.meta.multipart) {
      responses['413'] = errorRef('File too large');
      responses['415'] = errorRef('Unsupported file or content type');
    }
    responses['429'] = { ...errorRef('Rate limit exceeded'), headers: { ...rateLimitHeaders, 'Retry-After': { description: 'Seconds to wait', schema: { type: 'integer' } } } };
    responses['500'] = errorRef('Server error (no internals; quote X-Request-Id)');
    for (const [code, text] of Object.entries(route.meta.openapi?.errorResponses ?? {})) {
      if (!Array.isArray(route.meta.openapi?.errorResponses)) responses[code] = errorRef(String(text));
    }
    operation.responses = responses;
  }
  doc.webhooks = webhookEventsDocument(schemas);
  return doc;
}

const webhookHeaders = [
  { name: 'webhook-id', in: 'header', required: true, description: 'The event id: the same on every retry and replay (deduplicate on it)', schema: { type: 'string' } },
  { name: 'webhook-timestamp', in: 'header', required: true, description: 'Unix seconds when this attempt was signed; refuse ones older than 5 minutes', schema: { type: 'integer' } },
  {
    name: 'webhook-signature',
    in: 'header',
    required: true,
    description: 'Space-separated `v1,<base64 HMAC-SHA256>` of `<webhook-id>.<webhook-timestamp>.<body>` under the base64-decoded part of your `whsec_` secret (Standard Webhooks); two during a secret rotation',
    schema: { type: 'string' },
  },
];

/**
 * The event catalogue as OpenAPI 3.1 `webhooks`: one entry per event type with its payload schema, so the
 * document that describes the API also describes what it sends. Shared schemas become components.
 */
function webhookEventsDocument(components: Record<string, unknown>) {
  const entries = Object.entries(WEBHOOK_EVENTS).map(([type, dataSchema]) => {
    const json = z.toJSONSchema(dataSchema, { io: 'output', unrepresentable: 'any' }) as Record<string, any>;
    const { $schema: _ignored, $defs, ...data } = json;
    for (const [name, def] of Object.entries((($defs ?? {}) as Record<string, unknown>))) components[name] ??= def;
    const body = JSON.parse(JSON.stringify(data).replaceAll('"#/$defs/', '"#/components/schemas/'));
    return [
      type,
      {
        post: {
          summary: `${type} event`,
          description: 'Sent to every enabled endpoint subscribed to this type or `*`. Answer 2xx within 15 s; anything else is retried (8 attempts over about 27 h), and 410 disables the endpoint.',
          parameters: webhookHeaders,
          requestBody: {
            required: true,
            content: {
              'application/json': {
                schema: {
                  type: 'object',
                  required: ['id', 'type', 'timestamp', 'data'],
                  properties: { id: { type: 'string', format: 'uuid' }, type: { const: type }, timestamp: { type: 'string', format: 'date-time' }, data: body },
                },
              },
            },
          },
          responses: { '200': { description: 'Any 2xx acknowledges the delivery' }, '410': { description: 'Gone: the endpoint is disabled and receives nothing more' } },
        },
      },
    ] as const;
  });
  return Object.fromEntries(entries);
}
