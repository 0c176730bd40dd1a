/**
 * HubSpot CRM: create or update a contact by email (CRM v3 batch upsert with `idProperty: 'email'`).
 *
 * HubSpot errors are `{status: 'error', message, correlationId, category}`;
 * only the category (a fixed identifier such as VALIDATION_ERROR) is passed on.
 */
import type { GuardedResponse } from '../../../adapters/outbound/http/guarded-client.ts';
import { CredentialRefusedError, type JsonSchema, type ToolContext, ToolError, type Toolkit } from '../toolkit.ts';
import { asObject, identifier, jsonObject, optionalString, requireString, retryAfterSeconds, trimSlash, unreachable } from './provider-kit.ts';

const PROVIDER = 'HubSpot';
const CONTACT_PROPERTIES = ['firstname', 'lastname', 'phone', 'company'] as const;

const upsertContactSchema: JsonSchema = {
  type: 'object',
  properties: {
    email: { type: 'string', format: 'email', description: "The contact's email address: it identifies the contact to update, or the one to create" },
    firstname: { type: 'string', maxLength: 200, description: 'First name' },
    lastname: { type: 'string', maxLength: 200, description: 'Last name' },
    phone: { type: 'string', maxLength: 50, description: 'Phone number' },
    company: { type: 'string', maxLength: 200, description: 'Company name' },
  },
  required: ['email'],
  additionalProperties: false,
};

export const hubspotToolkit: Toolkit = {
  slug: 'hubspot',
  name: 'HubSpot',
  description: 'Create and update contacts in the connected HubSpot CRM.',
  auth: {
    scheme: 'oauth2',
    authorizeUrl: 'https://app.hubspot.com/oauth/authorize',
    tokenUrl: 'https://api.hubapi.com/oauth/v1/token',
    scopes: ['crm.objects.contacts.write', 'crm.objects.contacts.read'],
    scopeSeparator: ' ',
  },
  apiBaseUrl: 'https://api.hubapi.com',
  settingsSchema: { type: 'object', properties: {}, additionalProperties: false },
  tools: [
    {
      name: 'upsert_contact',
      description: 'Creates a HubSpot contact, or updates the one with the same email; only the properties given are changed.',
      inputSchema: upsertContactSchema,
      async run(input, ctx) {
        const email = requireString(input, 'email').trim();
        if (!email.includes('@')) throw new ToolError('email must be an email address');
        const properties: Record<string, string> = { email };
        for (const name of CONTACT_PROPERTIES) {
          const value = optionalString(input, name);
          if (value !== undefined) properties[name] = value;
        }
        const body = { inputs: [{ idProperty: 'email', id: email, properties }] };
        const payload = await callHubSpot(ctx, 'POST', '/crm/v3/objects/contacts/batch/upsert', body);

        const results = Array.isArray(payload['results']) ? payload['results'] : [];
        const first = asObject(results[0]);
        if (first === null) {
          // 207 Multi-Status: the batch ran but this input failed.
          const errors = Array.isArray(payload['errors']) ? payload['errors'] : [];
          const category = identifier(asObject(errors[0])?.['category']);
          throw new ToolError(`HubSpot refused the contact: ${category ?? 'unknown error'}`);
        }
        const id = first['id'];
        if (typeof id !== 'string' && typeof id !== 'number') throw new ToolError('HubSpot saved the contact but its answer lacked the contact id');
        return { id: String(id), created: first['new'] === true };
      },
    },
  ],

  async checkCredential(ctx) {
    try {
      await callHubSpot(ctx, 'GET', '/crm/v3/objects/contacts?limit=1', undefined);
      return { ok: true };
    } catch (err) {
      if (err instanceof ToolError) return { ok: false, reason: err.message };
      throw err;
    }
  },

  statusUrl(apiBaseUrl) {
    return new URL('/', apiBaseUrl).href;
  },
};

async function callHubSpot(ctx: ToolContext, method: 'GET' | 'POST', path: string, body: unknown): Promise<Record<string, unknown>> {
  if (ctx.credential.kind !== 'oauth2' || ctx.credential.accessToken === '') throw new ToolError('The HubSpot connection has no access token; reconnect it');
  const headers: Record<string, string> = { authorization: `Bearer ${ctx.credential.accessToken}`, accept: 'application/json' };
  if (body !== undefined) headers['content-type'] = 'application/json';
  let res: GuardedResponse;
  try {
    res = await ctx.http.request(`${trimSlash(ctx.apiBaseUrl)}${path}`, {
      method,
      headers,
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      timeoutMs: ctx.timeoutMs,
      ...(ctx.signal ? { signal: ctx.signal } : {}),
    });
  } catch (err) {
    throw outboundFailure(err);
  }
  if (res.status >= 200 && res.status < 300) {
    const payload = jsonObject(res);
    if (payload === null) throw new ToolError('HubSpot answered with something other than a JSON object');
    return payload;
  }
  const category = identifier(jsonObject(res)?.['category']);
  if (res.status === 429) {
    const seconds = retryAfterSeconds(res);
    throw new ToolError(`HubSpot is rate limiting these calls; ${seconds === undefined ? 'try again later' : `retry after ${seconds} s (Retry-After)`}`, true);
  }
  if (res.status >= 500) throw new ToolError(`HubSpot answered ${res.status}; try again later`, true);
  if (res.status === 401) throw new CredentialRefusedError(`HubSpot refused the connection's access token (${category ?? 'HTTP 401'}); reconnect the account`);
  throw new ToolError(`HubSpot refused the request: ${category ?? `HTTP ${res.status}`}`);
}

const outboundFailure = (err: unknown) => unreachable(PROVIDER, err);
