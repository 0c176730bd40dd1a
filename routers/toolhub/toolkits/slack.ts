/**
 * Slack: post messages as the workspace's bot (Web API, OAuth v2 bot token).
 *
 * Slack's Web API answers HTTP 200 for almost everything, success or not, with
 * `{ok: true, ...}` or `{ok: false, error: '<code>'}`; only rate limiting is
 * a 429 with Retry-After. Error codes are Slack's own short snake_case words,
 * safe to show; nothing else of a failed answer is ever passed on.
 */
import type { GuardedResponse } from '../../../adapters/outbound/http/guarded-client.ts';
import { CredentialRefusedError, type JsonSchema, type ToolContext, ToolError, type Toolkit } from '../toolkit.ts';
import { jsonObject, optionalString, requireString, retryAfterSeconds, trimSlash, unreachable } from './provider-kit.ts';

const PROVIDER = 'Slack';
const MAX_TEXT_LENGTH = 4000;
const AUTH_ERRORS = new Set(['not_authed', 'invalid_auth', 'account_inactive', 'token_revoked', 'token_expired', 'no_permission', 'missing_scope']);
/** Codes meaning the token itself is no longer good (as opposed to a missing scope). */
const REVOKED_ERRORS = new Set(['not_authed', 'invalid_auth', 'account_inactive', 'token_revoked', 'token_expired']);
const RETRYABLE_ERRORS = new Set(['ratelimited', 'internal_error', 'fatal_error', 'service_unavailable', 'request_timeout']);

const postMessageSchema: JsonSchema = {
  type: 'object',
  properties: {
    channel: { type: 'string', minLength: 1, maxLength: 200, description: 'The channel to post in: its ID (C0123ABCD) or its name (#general)' },
    text: { type: 'string', minLength: 1, maxLength: MAX_TEXT_LENGTH, description: 'The message, in Slack mrkdwn' },
    thread_ts: { type: 'string', minLength: 1, maxLength: 64, description: "To reply in a thread: the parent message's ts" },
  },
  required: ['channel', 'text'],
  additionalProperties: false,
};

export const slackToolkit: Toolkit = {
  slug: 'slack',
  name: 'Slack',
  description: 'Post messages to Slack channels of the connected workspace.',
  auth: {
    scheme: 'oauth2',
    authorizeUrl: 'https://slack.com/oauth/v2/authorize',
    tokenUrl: 'https://slack.com/api/oauth.v2.access',
    scopes: ['chat:write', 'channels:read'],
    scopeSeparator: ',',
  },
  apiBaseUrl: 'https://slack.com/api',
  settingsSchema: { type: 'object', properties: {}, additionalProperties: false },
  tools: [
    {
      name: 'post_message',
      description: 'Posts a message to a Slack channel (the app must be a member of it), optionally as a reply in a thread.',
      inputSchema: postMessageSchema,
      async run(input, ctx) {
        const channel = requireString(input, 'channel');
        const text = requireString(input, 'text');
        if (text.length > MAX_TEXT_LENGTH) throw new ToolError(`text is longer than ${MAX_TEXT_LENGTH} characters`);
        const threadTs = optionalString(input, 'thread_ts');
        const body: Record<string, unknown> = { channel, text };
        if (threadTs !== undefined) body['thread_ts'] = threadTs;

        const payload = await callSlack(ctx, 'chat.postMessage', body);
        if (payload['ok'] !== true) throw refusal('Slack refused the message', payload['error']);
        const postedChannel = payload['channel'];
        const ts = payload['ts'];
        if (typeof postedChannel !== 'string' || typeof ts !== 'string') throw new ToolError('Slack accepted the message but its answer lacked channel and ts');
        return { channel: postedChannel, ts };
      },
    },
  ],

  async checkCredential(ctx) {
    try {
      const payload = await callSlack(ctx, 'auth.test', undefined);
      if (payload['ok'] !== true) return { ok: false, reason: refusal('Slack refused the credential check', payload['error']).message };
      const team = payload['team'];
      const user = payload['user'];
      return typeof team === 'string' && typeof user === 'string' ? { ok: true, identity: `${team}/${user}` } : { ok: true };
    } catch (err) {
      if (err instanceof ToolError) return { ok: false, reason: err.message };
      throw err;
    }
  },

  statusUrl(apiBaseUrl) {
    return `${trimSlash(apiBaseUrl)}/api.test`;
  },
};

/** POSTs to a Web API method; returns the JSON answer (whose `ok` the caller judges). */
async function callSlack(ctx: ToolContext, method: string, body: Record<string, unknown> | undefined): Promise<Record<string, unknown>> {
  const headers: Record<string, string> = { authorization: `Bearer ${accessToken(ctx)}`, accept: 'application/json' };
  if (body !== undefined) headers['content-type'] = 'application/json; charset=utf-8';
  let res: GuardedResponse;
  try {
    res = await ctx.http.request(`${trimSlash(ctx.apiBaseUrl)}/${method}`, {
      method: 'POST',
      headers,
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      timeoutMs: ctx.timeoutMs,
      ...(ctx.signal ? { signal: ctx.signal } : {}),
    });
  } catch (err) {
    throw outboundFailure(err);
  }
  if (res.status === 429) {
    const seconds = retryAfterSeconds(res);
    throw new ToolError(
      seconds === undefined
        ? 'Slack is rate limiting these calls; try again later'
        : `Slack is rate limiting these calls; retry after ${seconds} s (Retry-After)`,
      true,
    );
  }
  if (res.status >= 500) throw new ToolError(`Slack answered ${res.status}; try again later`, true);
  if (res.status !== 200) throw new ToolError(`Slack answered ${res.status}`);
  const payload = jsonObject(res);
  if (payload === null) throw new ToolError('Slack answered with something other than a JSON object');
  return payload;
}

function refusal(prefix: string, error: unknown): ToolError {
  const code = typeof error === 'string' && /^[a-z0-9_.-]{1,80}$/i.test(error) ? error : 'unknown_error';
  if (REVOKED_ERRORS.has(code)) return new CredentialRefusedError(`Slack refused the connection's access token (${code}); reconnect the workspace`);
  if (AUTH_ERRORS.has(code)) return new ToolError(`Slack refused the connection's access token (${code}); reconnect the workspace`);
  return new ToolError(`${prefix}: ${code}`, RETRYABLE_ERRORS.has(code));
}

function accessToken(ctx: ToolContext): string {
  if (ctx.credential.kind !== 'oauth2' || ctx.credential.accessToken === '') throw new ToolError('The Slack connection has no access token; reconnect it');
  return ctx.credential.accessToken;
}

const outboundFailure = (err: unknown) => unreachable(PROVIDER, err);
