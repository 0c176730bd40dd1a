import type { AnyRouter } from '@trpc/server';
import { generateOpenApiDocument } from 'trpc-to-openapi';
import type { AuthRule, ErrorResponses } from '../../../routers/trpc.ts';
import { z } from 'zod';
import { ERROR_CODES, type ErrorCode } from '../../../schema/errors.ts';
import { WEBHOOK_EVENTS } from '../../../schema/webhooks.ts';
import { HTTP_STATUS } from '../http-status.ts';
import { buildRouteTable, type RestRoute } from './routes.ts';

const AUTH_LABEL: Record<AuthRule, { code: string; text: string }> = {
  public: { code: 'P', text: 'Public: no authentication' },
  session: { code: 'S', text: 'Owner session token (Authorization: Bearer <token>)' },
  apiKey: { code: 'K', text: 'API key (Authorization: Bearer svc_...)' },
  sessionOrApiKey: { code: 'S or K', text: 'Owner session token or API key' },
  visitor: { code: 'V', text: 'Visitor token from POST /api/v1/chat/{slug}/visitor-sessions (Authorization: Bearer vis_...)' },
  enterprise: { code: 'E', text: 'Session token of an enterprise account' },
  admin: { code: 'A', text: 'Session token of an admin' },
  cron: { code: 'I', text: 'Internal cron secret (Authorization: Bearer <CRON_SECRET>)' },
  billingSignature: { code: 'W', text: "The billing provider's signature (Stripe-Signature) over the raw body; no bearer token" },
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
 * with the closed list of codes. The library reads `errorResponses` as keyed by status; what it makes of our
 * code keys goes with the rest of its responses, all replaced here.
 */
export function buildOpenApiDocument(router: AnyRouter, info: { title: string; version: string; description: string }) {
  const doc = generateOpenApiDocument(router as never, { title: info.title, version: info.version, description: info.description, baseUrl: '/' }) as any;
  const table = buildRouteTable(router);
  doc.servers = [{ url: '/', description: 'This server' }];
  doc.components ??= {};
  doc.components.securitySchemes = {
    bearerAuth: {
      type: 'http',
      scheme: 'bearer',
      description: 'Owner session token, API key (svc_...), visitor token (vis_...) or cron secret, as each operation says',
    },
  };
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

  const procedures = router._def.procedures as Record<string, { _def: { inputs?: unknown[] } }>;
  for (const route of table.routes) {
    const operation = doc.paths?.[route.path]?.[route.method.toLowerCase()];
    if (!operation) continue;
    const auth = AUTH_LABEL[route.meta.auth ?? 'public'];
    operation['x-auth'] = auth.code;
    operation.description = [operation.description, `Auth: ${auth.text}.`].filter(Boolean).join('\n\n');
    operation.security = route.meta.auth === 'public' || route.meta.auth === 'billingSignature' ? [] : [{ bearerAuth: [] }];
    if (route.meta.rawBody) describeRawBody(operation, route.meta.rawBody.signatureHeader, `${route.method} ${route.path}`);
    else if (operation.requestBody) {
      operation.requestBody.required = bodyRequired(operation.requestBody, procedures[route.procedurePath]?._def.inputs ?? [], route.paramNames, schemas);
    }
    operation.responses = responsesFor(route, operation.responses?.['200']?.content?.['application/json']?.schema ?? {}, schemas);
  }
  doc.webhooks = webhookEventsDocument(schemas);
  return doc;
}

/** Stands in for every path parameter when an input is tried without a body: a UUID, which the id and slug rules accept. */
const SAMPLE_PATH_VALUE = '0b6f1c2e-4d5a-4e8f-9a7b-3c2d1e0f9a8b';

interface ParserLike {
  safeParse?: (value: unknown) => { success: boolean; error?: { issues: ReadonlyArray<{ path: readonly PropertyKey[] }> } };
}

/**
 * Whether a request without a body is refused. The REST adapter reads an absent body as no fields (the input is then
 * the path parameters alone), so the body is required only when the input needs something from it: a required
 * property, or a rule over optional ones ("give name or active") that JSON Schema does not show, found by trying
 * the input with the path parameters alone. Issues about those sample path values are not the body's.
 */
function bodyRequired(requestBody: any, inputs: unknown[], paramNames: string[], schemas: Record<string, any>): boolean {
  const schema = Object.values((requestBody.content ?? {}) as Record<string, { schema?: any }>)[0]?.schema;
  const ref = typeof schema?.$ref === 'string' ? /^#\/components\/schemas\/(.+)$/.exec(schema.$ref)?.[1] : undefined;
  const body = ref ? schemas[ref] : schema;
  if (Array.isArray(body?.required) && body.required.length > 0) return true;
  const pathOnly = Object.fromEntries(paramNames.map((name) => [name, SAMPLE_PATH_VALUE]));
  return inputs.some((input) => {
    const result = (input as ParserLike).safeParse?.(pathOnly);
    return result !== undefined && !result.success && (result.error?.issues ?? []).some((issue) => !paramNames.includes(String(issue.path[0])));
  });
}

/**
 * A rawBody procedure's input is `{ payload, signature }`, which the REST adapter builds from the body exactly as
 * sent and one header, so the document shows that request rather than the input: the body is what the payload's
 * `contentMediaType` and `contentSchema` (JSON Schema's words for what a string holds) say, and the signature is a
 * required header.
 */
function describeRawBody(operation: any, signatureHeader: string, where: string) {
  const input = operation.requestBody?.content?.['application/json']?.schema;
  const payload = input?.properties?.payload;
  const signature = input?.properties?.signature;
  if (!payload || !signature) throw new Error(`${where}: a rawBody procedure's input must be { payload, signature }`);
  const { contentMediaType, contentSchema, description, ...payloadRest } = payload;
  const { description: signatureDescription, ...signatureSchema } = signature;
  operation.requestBody = {
    required: true,
    ...(description ? { description } : {}),
    content: { [contentMediaType ?? 'application/octet-stream']: { schema: contentSchema ?? { ...payloadRest, format: 'binary' } } },
  };
  operation.parameters = [
    ...((operation.parameters ?? []) as Array<{ in: string; name: string }>).filter(
      (p) => !(p.in === 'header' && p.name.toLowerCase() === signatureHeader.toLowerCase()),
    ),
    {
      name: signatureHeader,
      in: 'header',
      required: true,
      description: signatureDescription ?? 'The signature over the raw body',
      schema: signatureSchema,
    },
  ];
}

/** An output of `z.never()`: the procedure always fails (the error-tracking example), so there is no success response. */
const isNever = (schema: any) =>
  typeof schema?.not === 'object' && schema.not !== null && Object.keys(schema.not).length === 0 && schema.type === undefined && schema.$ref === undefined;

const FORBIDDEN_REASON: Partial<Record<AuthRule, string>> = {
  session: 'an API key was sent where an owner session is needed',
  apiKey: 'an owner session was sent where an API key is needed, or the key is for another chat interface',
  sessionOrApiKey: 'a visitor token was sent',
  visitor: 'another kind of credential was sent, or the visitor token is for another chat interface',
  enterprise: 'an API key was sent, or the account is not on the enterprise plan',
  admin: 'an API key was sent, or the owner is not an admin',
  cron: 'an owner session, API key or visitor token was sent instead of the cron secret',
};

const SSE_FORMAT =
  'Server-Sent Events: each event is a line `data: <json>` and a blank line. JSON events carry `type` (the operation description lists them): ' +
  '`delta` events with `text`, then one `complete` event with the whole result; a failure after the stream started is sent as ' +
  '`{"type":"error","error":{message,code,details}}`. The literal `data: [DONE]` ends the stream. ' +
  'A failure before the first event is a normal JSON error envelope.';

const isStreamPlaceholder = (schema: any) => schema?.type === 'string';

/** The JSON answer of an SSE route: the output schema without the stream placeholder, or undefined when the route always streams. */
function jsonPartOf(data: any): any {
  if (isStreamPlaceholder(data)) return undefined;
  if (Array.isArray(data?.anyOf)) {
    const rest = data.anyOf.filter((branch: unknown) => !isStreamPlaceholder(branch));
    return rest.length === 1 ? rest[0] : { ...data, anyOf: rest };
  }
  return data;
}

/** The flat shape is the output object's own fields with `success: true` beside them, so it must be an object schema. */
function flatSchema(data: any, schemas: Record<string, any>, where: string) {
  const ref = typeof data?.$ref === 'string' ? /^#\/components\/schemas\/(.+)$/.exec(data.$ref)?.[1] : undefined;
  const object = ref ? schemas[ref] : data;
  if (object?.type !== 'object' || typeof object.properties !== 'object') throw new Error(`${where}: a flat response needs an object output schema`);
  return { ...object, properties: { success: { const: true }, ...object.properties }, required: ['success', ...(object.required ?? [])] };
}

/**
 * Every status an operation can answer, derived from what its route declares: its auth rule (401/403), whether it
 * reads a JSON or multipart body (413/415, and 400 for a malformed one), plus the error codes a procedure declares
 * itself in `meta.openapi.errorResponses` (CONFLICT, the upstream codes, ...) at the status the one mapping
 * (adapters/inbound/http-status.ts) gives each, and 503 where a body is read (the instance's
 * body memory budget is full). Every operation can answer 400 (any input, even a query string, is checked for
 * storable text), 404 (what it names, or relies on, is missing or was deleted while it ran), 429 and 500, and what the listener answers
 * before an operation is chosen (403 for plain HTTP, 408, 431). An operation whose output is
 * `z.never()` has no success response at all.
 */
function responsesFor(route: RestRoute, data: any, schemas: Record<string, any>) {
  const { meta } = route;
  const where = `${route.method} ${route.path}`;
  const responses: Record<string, unknown> = {};
  const status = String(meta.successStatus ?? 200);
  const success = (description: string) => {
    if (meta.rawResponse) {
      const type = meta.openapi?.contentTypes?.[0] ?? 'application/octet-stream';
      return { description, content: { [type]: { schema: { type: 'string', format: 'binary' } } } };
    }
    const content: Record<string, unknown> = {};
    const json = meta.sse ? jsonPartOf(data) : data;
    if (json !== undefined) {
      const schema = meta.flat
        ? flatSchema(json, schemas, where)
        : {
            type: 'object',
            required: ['success', 'data', 'version'],
            properties: { success: { const: true }, data: json, version: { const: 'v1' } },
            additionalProperties: false,
          };
      content['application/json'] = { schema };
    }
    if (meta.sse) content['text/event-stream'] = { schema: { type: 'string', description: SSE_FORMAT } };
    return { description, headers: rateLimitHeaders, content };
  };
  const streams = meta.sse
    ? jsonPartOf(data) === undefined
      ? ' (always Server-Sent Events)'
      : ' (JSON, or Server-Sent Events with `Accept: text/event-stream`)'
    : '';
  if (!isNever(data)) {
    responses[status] = success(`${meta.rawResponse ? 'The file' : status === '201' ? 'Created' : 'Successful response'}${streams}`);
    if (meta.otherSuccess) responses[String(meta.otherSuccess.status)] = success(meta.otherSuccess.description);
  }

  // A raw body is read whatever its Content-Type, and nothing checks that header: never a 415.
  const readsJson = route.method !== 'GET' && !meta.multipart && !meta.rawBody;
  responses['400'] = errorRef(
    meta.multipart
      ? 'Invalid request parameters (details name the field) or a malformed multipart body'
      : readsJson
        ? 'Invalid request parameters (details name the field) or malformed JSON'
        : 'Invalid request parameters (details name the field)',
  );
  const auth = meta.auth ?? 'public';
  if (auth !== 'public' && auth !== 'billingSignature') responses['401'] = errorRef('Authentication missing or invalid');
  // The listener and dispatch answer these before any operation is chosen, so every operation can see them.
  const forbidden = FORBIDDEN_REASON[auth];
  responses['403'] = errorRef(
    forbidden ? `Insufficient permissions: ${forbidden}; or HTTPS_REQUIRED for a plain-HTTP request` : 'HTTPS_REQUIRED: the request came over plain HTTP',
  );
  responses['408'] = errorRef('REQUEST_TIMEOUT: the headers or the body did not arrive in time');
  responses['431'] = errorRef('HEADERS_TOO_LARGE: the request headers are above the limit');
  // Any operation may find what it relies on deleted while it runs (routers/trpc.ts answers that 404), so every one has it.
  responses['404'] = errorRef(
    route.paramNames.length > 0 ? 'Not found (also for resources of other owners)' : 'Not found: something this request relies on was deleted while it ran',
  );
  if (meta.multipart) {
    responses['413'] = errorRef(
      meta.multipart.maxBytes === 'plan'
        ? 'File above the plan limit (free 10 MB, premium 50 MB, enterprise 100 MB)'
        : `File above ${meta.multipart.maxBytes} bytes`,
    );
    responses['415'] = errorRef('Not multipart/form-data, or a file of an unsupported kind');
  } else if (readsJson) {
    responses['413'] = errorRef('Request body above the JSON body limit (1 MiB by default)');
    responses['415'] = errorRef('A body sent with a Content-Type other than application/json');
  } else if (meta.rawBody) {
    responses['413'] = errorRef('Request body above the JSON body limit (1 MiB by default)');
  }
  const retryAfter = { 'Retry-After': { description: 'Seconds to wait', schema: { type: 'integer' } } };
  // Bodies are held in memory under a budget per client and per instance (adapters/inbound/request-body.ts).
  const readsBody = readsJson || meta.multipart !== undefined || meta.rawBody !== undefined;
  responses['429'] = {
    ...errorRef(
      readsBody ? "Rate limit exceeded, or this client's request bodies in progress fill its share of the body memory budget" : 'Rate limit exceeded',
    ),
    headers: { ...rateLimitHeaders, ...retryAfter },
  };
  if (readsBody) {
    responses['503'] = {
      ...errorRef('SERVICE_UNAVAILABLE: the request bodies in progress fill the body memory budget of this instance'),
      headers: { ...rateLimitHeaders, ...retryAfter },
    };
  }
  responses['500'] = errorRef('Server error (no internals; quote X-Request-Id)');
  for (const [status, text] of declaredByStatus(meta.openapi?.errorResponses ?? {})) {
    // A procedure's own 503 (no backend, billing off) does not replace the body budget's: both can happen.
    const budget = status === '503' && readsBody ? (responses['503'] as { description: string }) : undefined;
    responses[status] = budget ? { ...budget, description: `${text}; or ${budget.description}` } : errorRef(text);
  }
  return Object.fromEntries(Object.entries(responses).sort(([a], [b]) => Number(a) - Number(b)));
}

/**
 * A procedure's declared error responses by the status each code is answered with. Several codes can share a status
 * (the UPSTREAM_* failures are all 502), and the document has one response per status: their descriptions are joined,
 * once each, so codes a procedure throws in the same case can share one text.
 */
function declaredByStatus(declared: ErrorResponses): Map<string, string> {
  const texts = new Map<string, Set<string>>();
  for (const [code, text] of Object.entries(declared) as Array<[ErrorCode, string | undefined]>) {
    if (text === undefined) continue;
    const status = String(HTTP_STATUS[code]);
    texts.set(status, (texts.get(status) ?? new Set()).add(text));
  }
  return new Map([...texts].map(([status, set]) => [status, [...set].join('; or ')]));
}

const webhookHeaders = [
  {
    name: 'webhook-id',
    in: 'header',
    required: true,
    description: 'The event id: the same on every retry and replay (deduplicate on it)',
    schema: { type: 'string' },
  },
  {
    name: 'webhook-timestamp',
    in: 'header',
    required: true,
    description: 'Unix seconds when this attempt was signed; refuse ones older than 5 minutes',
    schema: { type: 'integer' },
  },
  {
    name: 'webhook-signature',
    in: 'header',
    required: true,
    description:
      'Space-separated `v1,<base64 HMAC-SHA256>` of `<webhook-id>.<webhook-timestamp>.<body>` ' +
      'under the base64-decoded part of your `whsec_` secret (Standard Webhooks); two during a secret rotation',
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
    for (const [name, def] of Object.entries(($defs ?? {}) as Record<string, unknown>)) components[name] ??= def;
    const body = JSON.parse(JSON.stringify(data).replaceAll('"#/$defs/', '"#/components/schemas/'));
    return [
      type,
      {
        post: {
          summary: `${type} event`,
          description:
            'Sent to every enabled endpoint subscribed to this type or `*`. Answer 2xx within 15 s; ' +
            'anything else is retried (8 attempts over about 27 h), and 410 disables the endpoint.',
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
          responses: {
            '200': { description: 'Any 2xx acknowledges the delivery' },
            '410': { description: 'Gone: the endpoint is disabled and receives nothing more' },
          },
        },
      },
    ] as const;
  });
  return Object.fromEntries(entries);
}
