/**
 * Google Calendar: availability (freeBusy) and event creation (Calendar API v3).
 *
 * Google answers errors with a 4xx/5xx and `{error: {code, message, status, errors: [{domain, reason}]}}`;
 * only the canonical `status` (or, for the older calendar errors without one,
 * the first `reason`) is passed on: both are fixed identifiers, never free text.
 */
import type { GuardedResponse } from '../../../adapters/outbound/http/guarded-client.ts';
import { CredentialRefusedError, type JsonSchema, type ToolContext, ToolError, type Toolkit } from '../toolkit.ts';
import { asObject, identifier, jsonObject, optionalString, requireString, retryAfterSeconds, trimSlash, unreachable } from './provider-kit.ts';

const PROVIDER = 'Google Calendar';
const RATE_LIMIT_REASONS = new Set(['rateLimitExceeded', 'userRateLimitExceeded', 'quotaExceeded']);

const freeBusySchema: JsonSchema = {
  type: 'object',
  properties: {
    timeMin: { type: 'string', format: 'date-time', description: 'Start of the interval (RFC 3339, with offset)' },
    timeMax: { type: 'string', format: 'date-time', description: 'End of the interval (RFC 3339, with offset)' },
    calendarId: { type: 'string', minLength: 1, default: 'primary', description: "The calendar to read; 'primary' is the connected user's own" },
    timeZone: { type: 'string', minLength: 1, description: 'IANA time zone of the answer (e.g. Europe/Paris); UTC by default' },
  },
  required: ['timeMin', 'timeMax'],
  additionalProperties: false,
};

const createEventSchema: JsonSchema = {
  type: 'object',
  properties: {
    summary: { type: 'string', minLength: 1, maxLength: 1024, description: "The event's title" },
    start: { type: 'string', format: 'date-time', description: 'Start (RFC 3339)' },
    end: { type: 'string', format: 'date-time', description: 'End (RFC 3339)' },
    timeZone: { type: 'string', minLength: 1, description: 'IANA time zone of start and end (e.g. Europe/Paris)' },
    description: { type: 'string', maxLength: 8000, description: "The event's description" },
    attendees: {
      type: 'array',
      items: { type: 'string', format: 'email' },
      maxItems: 100,
      description: 'Email addresses to invite (they are sent invitations)',
    },
    calendarId: { type: 'string', minLength: 1, default: 'primary', description: "The calendar to add the event to; 'primary' is the connected user's own" },
  },
  required: ['summary', 'start', 'end'],
  additionalProperties: false,
};

export const googleCalendarToolkit: Toolkit = {
  slug: 'google_calendar',
  name: 'Google Calendar',
  description: "Check availability and create events in the connected Google account's calendars.",
  auth: {
    scheme: 'oauth2',
    authorizeUrl: 'https://accounts.google.com/o/oauth2/v2/auth',
    tokenUrl: 'https://oauth2.googleapis.com/token',
    scopes: ['https://www.googleapis.com/auth/calendar.events', 'https://www.googleapis.com/auth/calendar.freebusy'],
    scopeSeparator: ' ',
  },
  apiBaseUrl: 'https://www.googleapis.com/calendar/v3',
  settingsSchema: { type: 'object', properties: {}, additionalProperties: false },
  tools: [
    {
      name: 'free_busy',
      description: 'Lists the busy intervals of a calendar between two instants (free time is everything else).',
      inputSchema: freeBusySchema,
      async run(input, ctx) {
        const timeMin = requireString(input, 'timeMin');
        const timeMax = requireString(input, 'timeMax');
        const calendarId = optionalString(input, 'calendarId') ?? 'primary';
        const timeZone = optionalString(input, 'timeZone');
        const body: Record<string, unknown> = { timeMin, timeMax };
        if (timeZone !== undefined) body['timeZone'] = timeZone;
        body['items'] = [{ id: calendarId }];

        const payload = await callGoogle(ctx, 'POST', `${trimSlash(ctx.apiBaseUrl)}/freeBusy`, body);
        const calendars = asObject(payload['calendars']);
        // The id is the model's choice: only an own entry of the answer is that calendar (`__proto__` would find
        // Object.prototype, an empty calendar, and report the time as free).
        const calendar = calendars === null || !Object.hasOwn(calendars, calendarId) ? null : asObject(calendars[calendarId]);
        if (calendar === null) throw new ToolError('Google Calendar answered without the calendar asked for');
        const errors = calendar['errors'];
        if (Array.isArray(errors) && errors.length > 0) {
          throw new ToolError(`Google Calendar could not read that calendar's availability: ${identifier(asObject(errors[0])?.['reason']) ?? 'unknown error'}`);
        }
        const busy = Array.isArray(calendar['busy']) ? calendar['busy'] : [];
        return {
          busy: busy.flatMap((block) => {
            const interval = asObject(block);
            const start = interval?.['start'];
            const end = interval?.['end'];
            return typeof start === 'string' && typeof end === 'string' ? [{ start, end }] : [];
          }),
        };
      },
    },
    {
      name: 'create_event',
      description: 'Creates a calendar event; attendees are emailed an invitation.',
      inputSchema: createEventSchema,
      async run(input, ctx) {
        const summary = requireString(input, 'summary');
        const start = requireString(input, 'start');
        const end = requireString(input, 'end');
        const timeZone = optionalString(input, 'timeZone');
        const description = optionalString(input, 'description');
        const calendarId = optionalString(input, 'calendarId') ?? 'primary';
        const attendees = input['attendees'];
        if (attendees !== undefined && attendees !== null && (!Array.isArray(attendees) || attendees.some((a) => typeof a !== 'string' || !a.includes('@')))) {
          throw new ToolError('attendees must be a list of email addresses');
        }

        const event: Record<string, unknown> = { summary };
        if (description !== undefined) event['description'] = description;
        event['start'] = timeZone === undefined ? { dateTime: start } : { dateTime: start, timeZone };
        event['end'] = timeZone === undefined ? { dateTime: end } : { dateTime: end, timeZone };
        if (Array.isArray(attendees) && attendees.length > 0) event['attendees'] = (attendees as string[]).map((email) => ({ email }));

        const url = `${trimSlash(ctx.apiBaseUrl)}/calendars/${encodeURIComponent(calendarId)}/events?sendUpdates=all`;
        const payload = await callGoogle(ctx, 'POST', url, event);
        const id = payload['id'];
        if (typeof id !== 'string') throw new ToolError('Google Calendar created the event but its answer lacked the event id');
        const htmlLink = payload['htmlLink'];
        const status = payload['status'];
        return { id, htmlLink: typeof htmlLink === 'string' ? htmlLink : null, status: typeof status === 'string' ? status : null };
      },
    },
  ],

  async checkCredential(ctx) {
    try {
      const payload = await callGoogle(ctx, 'GET', `${trimSlash(ctx.apiBaseUrl)}/users/me/calendarList?maxResults=1`, undefined);
      const items = Array.isArray(payload['items']) ? payload['items'] : [];
      const first = asObject(items[0]);
      const identity = first?.['primary'] === true && typeof first['id'] === 'string' ? first['id'] : undefined;
      return identity === undefined ? { ok: true } : { ok: true, identity };
    } catch (err) {
      if (err instanceof ToolError) return { ok: false, reason: err.message };
      throw err;
    }
  },

  statusUrl(apiBaseUrl) {
    return new URL('/discovery/v1/apis/calendar/v3/rest', apiBaseUrl).href;
  },
};

async function callGoogle(ctx: ToolContext, method: 'GET' | 'POST', url: string, body: Record<string, unknown> | undefined): Promise<Record<string, unknown>> {
  if (ctx.credential.kind !== 'oauth2' || ctx.credential.accessToken === '')
    throw new ToolError('The Google Calendar connection has no access token; reconnect it');
  const headers: Record<string, string> = { authorization: `Bearer ${ctx.credential.accessToken}`, accept: 'application/json' };
  if (body !== undefined) headers['content-type'] = 'application/json';
  let res: GuardedResponse;
  try {
    res = await ctx.http.request(url, {
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
    if (payload === null) throw new ToolError('Google Calendar answered with something other than a JSON object');
    return payload;
  }
  if (res.status === 401) throw new CredentialRefusedError("Google Calendar: the connection's access token was refused; reconnect the account");
  if (res.status === 429) {
    const seconds = retryAfterSeconds(res);
    throw new ToolError(
      `Google Calendar is rate limiting these calls; ${seconds === undefined ? 'try again later' : `retry after ${seconds} s (Retry-After)`}`,
      true,
    );
  }
  if (res.status >= 500) throw new ToolError(`Google Calendar answered ${res.status}; try again later`, true);
  const error = asObject(jsonObject(res)?.['error']);
  const errors = error?.['errors'];
  const reason = identifier(Array.isArray(errors) ? asObject(errors[0])?.['reason'] : undefined);
  const status = identifier(error?.['status']);
  if (res.status === 403 && reason !== undefined && RATE_LIMIT_REASONS.has(reason)) {
    throw new ToolError(`Google Calendar is rate limiting these calls (${reason}); try again later`, true);
  }
  throw new ToolError(`Google Calendar refused the request: ${status ?? reason ?? `HTTP ${res.status}`}`);
}

const outboundFailure = (err: unknown) => unreachable(PROVIDER, err);
