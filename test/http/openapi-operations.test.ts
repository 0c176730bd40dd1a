import { randomBytes, randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import * as toolhubRepo from '../../routers/toolhub/repository.ts';
import { insertWebhook } from '../../routers/webhooks/repository.ts';
import { startFakeStripe, stripeSettings, type FakeStripe } from '../helpers/fake-stripe.ts';
import { openApiContract, startTestApp, type TestApp } from '../helpers/test-app.ts';
import { INLINE_CONTENT_MAX_BYTES } from '../../routers/knowledge-base/documents-router.ts';

/**
 * Operations whose OpenAPI entry used to say something the service does not do: statuses they answer but did not
 * list, a success they never send, a request body they do not take as described, bodies marked required that the
 * service does not need. Every response here is also checked against the served document by the test app, so an
 * answer with an undocumented status fails the request that received it.
 */

const WEBHOOK_SECRET = 'whsec_openapi_operations_0123456789';
let app: TestApp;
let stripe: FakeStripe;
/** A token endpoint that refuses every refresh the way a provider in trouble does (an OAuth error other than invalid_grant). */
let tokenEndpoint: Server;
let owner: { token: string; ownerId: string };
let doc: any;

const operation = (method: string, path: string) => doc.paths[path][method.toLowerCase()];

beforeAll(async () => {
  stripe = await startFakeStripe();
  tokenEndpoint = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(400, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: 'temporarily_unavailable', error_description: 'Try again later' }));
    });
  });
  await new Promise<void>((resolve) => tokenEndpoint.listen(0, '127.0.0.1', resolve));
  const tokenHost = `127.0.0.1:${(tokenEndpoint.address() as AddressInfo).port}`;
  const billing = stripeSettings(stripe, WEBHOOK_SECRET);
  app = await startTestApp({
    ...billing,
    OUTBOUND_ALLOW_HOSTS: `${billing.OUTBOUND_ALLOW_HOSTS},${tokenHost}`,
    TOOLHUB_PROVIDER_URLS: `slack.token=http://${tokenHost}/token`,
    RATE_LIMIT_DEFAULT: '10000',
    JOB_CONCURRENCY: '0',
    WEBHOOK_CONCURRENCY: '0',
  });
  owner = await app.signUp('openapi-ops');
  doc = (await openApiContract(app.url)).document;
});
afterAll(async () => {
  await app?.stop();
  await stripe?.close();
  await new Promise((resolve) => tokenEndpoint?.close(resolve));
});

describe('statuses the service answers are listed', () => {
  it('activate answers 502 when the token refresh is refused, and lists 504 for a refresh that never finishes', async () => {
    const config = await app.request('POST', '/api/v1/toolhub/auth-configs', {
      token: owner.token,
      body: { toolkit: 'slack', clientId: 'client', clientSecret: 'secret' },
    });
    expect(config.status, config.text).toBe(201);
    const db = app.deps.database.db;
    const account = await toolhubRepo.insertAccount(db, {
      id: randomUUID(),
      owner_id: owner.ownerId,
      toolkit: 'slack',
      auth_config_id: config.body.data.authConfig.id,
      label: null,
      status: 'ACTIVE',
      status_reason: null,
      access_token_enc: app.deps.secrets.seal('expired-access-token'),
      settings: {},
      scopes: [],
    });
    await toolhubRepo.updateAccount(db, account.id, {
      refresh_token_enc: app.deps.secrets.seal('refresh-token'),
      token_expires_at: new Date(Date.now() - 60_000),
    });

    const refused = await app.request('POST', `/api/v1/toolhub/accounts/${account.id}/activate`, { token: owner.token });
    expect(refused.status, refused.text).toBe(502);
    expect(refused.body.error).toMatchObject({ code: 'UPSTREAM_ERROR', details: 'The token refresh was refused (temporarily_unavailable)' });
    // Waiting out another instance's refresh takes 25 s: the listing is checked, not the wait.
    expect(Object.keys(operation('POST', '/api/v1/toolhub/accounts/{accountId}/activate').responses)).toEqual(expect.arrayContaining(['409', '502', '504']));
  });

  it('an upload answers 409 when the same content is deleted while it is uploaded again', async () => {
    const configId = (await app.request('POST', '/api/v1/knowledge-base/configs', { token: owner.token, body: { name: 'uploads' } })).body.data.config.id;
    // Larger than what is kept in the database, so that its bytes go to the blob store and are freed there.
    const text = `The same content ${randomUUID()}. `;
    const file = {
      fileName: 'same.txt',
      contentType: 'text/plain',
      bytes: Buffer.from(text.repeat(Math.ceil((INLINE_CONTENT_MAX_BYTES + 1) / text.length))),
      fields: { configId },
    };
    const first = await app.upload('/api/v1/knowledge-base/documents', { token: owner.token, ...file });
    expect(first.status, first.text).toBe(201);
    // The second upload finds the first by its content, frees its own copy of the bytes, then reads the first: a
    // DELETE of the first landing in between is what makes the 409.
    const blobs = app.deps.blobs;
    const freeBytes = blobs.delete.bind(blobs);
    const spy = vi.spyOn(blobs, 'delete').mockImplementationOnce(async (key) => {
      await freeBytes(key);
      await app.request('DELETE', `/api/v1/knowledge-base/documents/${first.body.data.document.id}`, { token: owner.token });
    });
    try {
      const again = await app.upload('/api/v1/knowledge-base/documents', { token: owner.token, ...file });
      expect(again.status, again.text).toBe(409);
      expect(again.body.error.code).toBe('CONFLICT');
    } finally {
      spy.mockRestore();
    }
    expect((await app.upload('/api/v1/knowledge-base/documents', { token: owner.token, ...file })).status).toBe(201);
  });
});

describe('what the listener answers before an operation is chosen', () => {
  it('every operation lists 403 (plain HTTP), 408 and 431', () => {
    for (const [path, methods] of Object.entries(doc.paths as Record<string, Record<string, { responses: Record<string, unknown> }>>)) {
      for (const [method, op] of Object.entries(methods)) {
        expect(Object.keys(op.responses), `${method} ${path}`).toEqual(expect.arrayContaining(['403', '408', '431']));
      }
    }
  });
});

describe('the error-tracking example', () => {
  it('documents no success, only its errors, and answers the 500', async () => {
    const responses = operation('GET', '/api/v1/error-tracking-example-api').responses;
    expect(Object.keys(responses)).toEqual(['400', '403', '404', '408', '429', '431', '500']);
    const res = await app.request('GET', '/api/v1/error-tracking-example-api');
    expect(res.status).toBe(500);
    expect(res.body.error.code).toBe('INTERNAL_ERROR');
  });
});

describe('the billing webhook', () => {
  const path = '/api/v1/payments/webhook';
  const event = () => ({
    id: `evt_${randomBytes(8).toString('hex')}`,
    object: 'event',
    type: 'customer.created',
    created: 1_800_000_000,
    data: { object: {} },
  });

  it('documents the Stripe event as the body and Stripe-Signature as a required header, never a 415', () => {
    const webhook = operation('POST', path);
    expect(webhook.parameters).toEqual([
      expect.objectContaining({ name: 'Stripe-Signature', in: 'header', required: true, schema: { type: 'string', maxLength: 4096 } }),
    ]);
    expect(webhook.requestBody.required).toBe(true);
    expect(Object.keys(webhook.requestBody.content)).toEqual(['application/json']);
    const schema = webhook.requestBody.content['application/json'].schema;
    expect(schema).toMatchObject({ type: 'object', required: ['id', 'type'] });
    expect(schema.properties).not.toHaveProperty('payload');
    expect(schema.properties).not.toHaveProperty('signature');
    expect(webhook.responses).not.toHaveProperty('415');
  });

  it('takes what the document describes: a signed event with the header is applied; the old {payload, signature} shape is not the body', async () => {
    const ajv = new Ajv2020({ strict: false });
    const validBody = ajv.compile(operation('POST', path).requestBody.content['application/json'].schema);
    const sent = event();
    expect(validBody(sent)).toBe(true);
    const { payload, signature } = stripe.sign(JSON.stringify(sent), WEBHOOK_SECRET);
    expect(validBody({ payload, signature })).toBe(false);

    const res = await app.request('POST', path, {
      rawBody: Buffer.from(payload),
      headers: { 'content-type': 'application/json', 'stripe-signature': signature },
    });
    expect(res.status, res.text).toBe(200);
    expect(res.body.data).toMatchObject({ received: true, eventId: sent.id, outcome: 'ignored' });
    // The raw body is read whatever its Content-Type: not a 415.
    const other = stripe.sign(JSON.stringify(event()), WEBHOOK_SECRET);
    const plain = await app.request('POST', path, {
      rawBody: Buffer.from(other.payload),
      headers: { 'content-type': 'text/plain', 'stripe-signature': other.signature },
    });
    expect(plain.status, plain.text).toBe(200);
    const unsigned = await app.request('POST', path, { rawBody: Buffer.from(JSON.stringify(event())), headers: { 'content-type': 'application/json' } });
    expect(unsigned.status).toBe(400);
  });
});

describe('request bodies', () => {
  it('cancel and validate need no body: the document says so and the service takes the request without one', async () => {
    expect(operation('POST', '/api/v1/bookings/{id}/cancel').requestBody.required).toBe(false);
    expect(operation('POST', '/api/v1/enterprise/webhooks/{webhookId}/validate').requestBody.required).toBe(false);

    const iface = (await app.request('POST', '/api/v1/chat-interfaces', { token: owner.token, body: { name: 'Bookings' } })).body.data.chatInterface;
    const booked = await app.request('POST', '/api/v1/bookings/manual', {
      token: owner.token,
      body: {
        chatInterfaceId: iface.id,
        start: '2027-05-03T14:00:00.000Z',
        end: '2027-05-03T14:30:00.000Z',
        attendee: { name: 'Ada', email: 'ada@example.com', timeZone: 'UTC' },
      },
    });
    expect(booked.status, booked.text).toBe(201);
    const cancelled = await app.request('POST', `/api/v1/bookings/${booked.body.data.booking.id}/cancel`, { token: owner.token });
    expect(cancelled.status, cancelled.text).toBe(200);
    expect(cancelled.body.data.booking).toMatchObject({ status: 'cancelled', cancelReason: null });

    await app.setOwner(owner.ownerId, { plan: 'enterprise' });
    // A loopback URL: validate refuses it by the address rule, with no request made.
    const hook = await insertWebhook(app.deps.database.db, {
      id: randomUUID(),
      owner_id: owner.ownerId,
      url: 'https://127.0.0.1:9/hook',
      description: null,
      events: ['webhook.test'],
      enabled: true,
      secret_enc: app.deps.secrets.seal(`whsec_${randomBytes(32).toString('base64')}`),
    });
    const validated = await app.request('POST', `/api/v1/enterprise/webhooks/${hook.id}/validate`, { token: owner.token });
    expect(validated.status, validated.text).toBe(200);
    expect(validated.body).toMatchObject({ success: true, valid: false });
  });

  it('a body stays required when the input needs one of its optional fields (give name or active)', async () => {
    const update = operation('PATCH', '/api/v1/api-keys/{id}');
    expect(update.requestBody.content['application/json'].schema.required ?? []).toEqual([]);
    expect(update.requestBody.required).toBe(true);
    const iface = (await app.request('POST', '/api/v1/chat-interfaces', { token: owner.token, body: { name: 'Keys' } })).body.data.chatInterface;
    const key = await app.request('POST', '/api/v1/api-keys', { token: owner.token, body: { name: 'k', chatInterfaceId: iface.id } });
    expect(key.status, key.text).toBe(201);
    const bodiless = await app.request('PATCH', `/api/v1/api-keys/${key.body.data.apiKey.id}`, { token: owner.token });
    expect(bodiless.status).toBe(400);
    expect(bodiless.body.error.details).toContain('give name or active');
  });

  it('a ticket update needs one of its fields: the document says the body is required', async () => {
    expect(operation('PATCH', '/api/v1/support/tickets/{ticketId}').requestBody.required).toBe(true);
    const bodiless = await app.request('PATCH', `/api/v1/support/tickets/${randomUUID()}`, { token: owner.token });
    expect([bodiless.status, bodiless.body.error.details]).toEqual([400, 'reply, status, priority or assignee: give at least one']);
  });
});
