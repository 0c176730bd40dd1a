import { z } from 'zod';
import { describe, expect, it } from 'vitest';
import { toClientError } from '../../adapters/inbound/client-error.ts';
import { HTTP_STATUS } from '../../adapters/inbound/http-status.ts';
import type { AppDeps, Context } from '../../routers/context.ts';
import { createCallerFactory, publicProcedure, router, TRPCError } from '../../routers/trpc.ts';
import { AppError, describeIssues, ERROR_CODES } from '../../schema/errors.ts';
import { loadConfig } from '../../schema/config.ts';
import { createMemoryRateLimiter } from '../../adapters/outbound/rate-limit/memory.ts';

const GENERIC = { code: 'INTERNAL_ERROR', message: 'Internal server error', details: 'The error was logged; quote the request id when reporting it' };

function zodErrorOf(schema: z.ZodType, value: unknown): z.ZodError {
  const result = schema.safeParse(value);
  if (result.success) throw new Error('expected a validation failure');
  return result.error;
}

describe('toClientError', () => {
  it('passes an AppError through unchanged', () => {
    const error = new AppError('NOT_FOUND', 'Chat interface not found', 'id=abc', { 'X-Test': '1' });
    const result = toClientError(error);
    expect(result.appError).toBe(error);
    expect(result.unexpected).toBe(false);
  });

  it('unwraps an AppError wrapped in a TRPCError, whatever the TRPC code', () => {
    const error = new AppError('RATE_LIMITED', 'Rate limit exceeded', 'retry after 3 s');
    for (const code of ['INTERNAL_SERVER_ERROR', 'BAD_REQUEST', 'FORBIDDEN'] as const) {
      const result = toClientError(new TRPCError({ code, cause: error }));
      expect(result.appError).toBe(error);
      expect(result.unexpected).toBe(false);
    }
  });

  it('turns a BAD_REQUEST with a ZodError cause into VALIDATION_FAILED listing path: message', () => {
    const schema = z.object({ name: z.string(), items: z.array(z.object({ qty: z.number() })) });
    const zodError = zodErrorOf(schema, { items: [{ qty: 1 }, { qty: 'x' }] });
    const { appError, unexpected } = toClientError(new TRPCError({ code: 'BAD_REQUEST', cause: zodError }));
    expect(unexpected).toBe(false);
    expect(appError).toBeInstanceOf(AppError);
    expect(appError.code).toBe('VALIDATION_FAILED');
    expect(appError.message).toBe('Invalid request parameters');
    expect(appError.details).toBe('name: Invalid input: expected string, received undefined; items.1.qty: Invalid input: expected number, received string');
  });

  it('names a root-level issue (body) and lists at most 10 issues', () => {
    expect(describeIssues([{ path: [], message: 'Expected object' }])).toBe('(body): Expected object');
    const many = Array.from({ length: 12 }, (_, i) => ({ path: [`f${i}`], message: 'bad' }));
    expect(describeIssues(many)).toBe(Array.from({ length: 10 }, (_, i) => `f${i}: bad`).join('; '));
    const zodError = zodErrorOf(z.object({ a: z.string() }), 'not an object');
    expect(toClientError(new TRPCError({ code: 'BAD_REQUEST', cause: zodError })).appError.details).toBe(
      '(body): Invalid input: expected object, received string',
    );
  });

  it('a real tRPC input validation failure becomes VALIDATION_FAILED', async () => {
    const r = router({
      create: publicProcedure.input(z.object({ title: z.string().min(3) })).mutation(({ input }) => input.title),
    });
    const deps = { config: loadConfig({}), rateLimiter: createMemoryRateLimiter() } as unknown as AppDeps;
    const ctx: Context = {
      deps,
      requestId: 'r1',
      clientIp: '127.0.0.1',
      authorization: undefined,
      responseHeaders: {},
      response: {},
      acceptsEventStream: false,
      getCaller: async () => ({ kind: 'anonymous', reason: 'missing' }),
    };
    const caller = createCallerFactory(r)(ctx);
    expect(await caller.create({ title: 'long enough' })).toBe('long enough');
    const thrown = await caller.create({ title: 'x' }).then(
      () => undefined,
      (e: unknown) => e,
    );
    const { appError, unexpected } = toClientError(thrown);
    expect(unexpected).toBe(false);
    expect(appError.code).toBe('VALIDATION_FAILED');
    expect(appError.details).toBe('title: Too small: expected string to have >=3 characters');
    await deps.rateLimiter.close();
  });

  it('hides a plain Error behind a generic INTERNAL_ERROR', () => {
    const secret = 'connect ECONNREFUSED postgres://admin:hunter2@db:5432';
    for (const error of [new Error(secret), new TypeError(secret), new TRPCError({ code: 'INTERNAL_SERVER_ERROR', cause: new Error(secret) })]) {
      const { appError, unexpected } = toClientError(error);
      expect(unexpected).toBe(true);
      expect({ code: appError.code, message: appError.message, details: appError.details }).toEqual(GENERIC);
      expect(JSON.stringify({ m: appError.message, d: appError.details })).not.toContain('hunter2');
    }
  });

  it('treats non-Error throws as INTERNAL_ERROR', () => {
    for (const thrown of ['a string', undefined, null, 42, { message: 'object' }]) {
      const { appError, unexpected } = toClientError(thrown);
      expect(unexpected).toBe(true);
      expect(appError.code).toBe('INTERNAL_ERROR');
      expect(appError.message).toBe('Internal server error');
    }
  });

  it('maps TRPC codes to error codes, keeping the message', () => {
    const cases = [
      ['PARSE_ERROR', 'MALFORMED_JSON'],
      ['BAD_REQUEST', 'BAD_REQUEST'],
      ['UNAUTHORIZED', 'UNAUTHORIZED'],
      ['FORBIDDEN', 'FORBIDDEN'],
      ['NOT_FOUND', 'NOT_FOUND'],
      ['METHOD_NOT_SUPPORTED', 'METHOD_NOT_ALLOWED'],
      ['CONFLICT', 'CONFLICT'],
      ['PAYLOAD_TOO_LARGE', 'PAYLOAD_TOO_LARGE'],
      ['UNSUPPORTED_MEDIA_TYPE', 'UNSUPPORTED_MEDIA_TYPE'],
      ['TOO_MANY_REQUESTS', 'RATE_LIMITED'],
      ['SERVICE_UNAVAILABLE', 'SERVICE_UNAVAILABLE'],
    ] as const;
    for (const [trpcCode, appCode] of cases) {
      const { appError, unexpected } = toClientError(new TRPCError({ code: trpcCode, message: `msg for ${trpcCode}` }));
      expect(unexpected, trpcCode).toBe(false);
      expect(appError.code, trpcCode).toBe(appCode);
      expect(appError.message, trpcCode).toBe(`msg for ${trpcCode}`);
    }
  });

  it('unmapped TRPC codes are unexpected', () => {
    for (const code of ['INTERNAL_SERVER_ERROR', 'TIMEOUT', 'NOT_IMPLEMENTED', 'CLIENT_CLOSED_REQUEST'] as const) {
      const { appError, unexpected } = toClientError(new TRPCError({ code, message: 'internal detail' }));
      expect(unexpected, code).toBe(true);
      expect(appError.code, code).toBe('INTERNAL_ERROR');
      expect(appError.message, code).toBe('Internal server error');
    }
  });
});

describe('HTTP_STATUS', () => {
  it('covers exactly the codes of ERROR_CODES with an allowed status', () => {
    const allowed = new Set([400, 401, 403, 404, 405, 408, 409, 413, 415, 421, 429, 431, 500, 502, 503, 504]);
    expect(Object.keys(HTTP_STATUS).sort()).toEqual([...ERROR_CODES].sort());
    for (const code of ERROR_CODES) {
      expect(allowed.has(HTTP_STATUS[code]), `${code} -> ${HTTP_STATUS[code]}`).toBe(true);
    }
  });

  it('maps each code to its status', () => {
    expect(HTTP_STATUS).toEqual({
      BAD_REQUEST: 400,
      VALIDATION_FAILED: 400,
      MALFORMED_JSON: 400,
      UNAUTHORIZED: 401,
      FORBIDDEN: 403,
      HTTPS_REQUIRED: 403,
      NOT_FOUND: 404,
      METHOD_NOT_ALLOWED: 405,
      REQUEST_TIMEOUT: 408,
      CONFLICT: 409,
      PAYLOAD_TOO_LARGE: 413,
      UNSUPPORTED_MEDIA_TYPE: 415,
      HEADERS_TOO_LARGE: 431,
      MISDIRECTED_REQUEST: 421,
      RATE_LIMITED: 429,
      UPSTREAM_CONNECTION_FAILED: 502,
      UPSTREAM_INVALID_RESPONSE: 502,
      UPSTREAM_TIMEOUT: 504,
      UPSTREAM_ERROR: 502,
      INTERNAL_ERROR: 500,
      SERVICE_UNAVAILABLE: 503,
    });
  });
});
