import type { IncomingMessage } from 'node:http';
import { PassThrough } from 'node:stream';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { describe, expect, it } from 'vitest';
import { AppError } from '../../schema/errors.ts';
import { attachBodyLease, type BodyBudget, type BodyLease, createBodyBudget, readBodyBytes, readJsonBody } from './request-body.ts';

const PER_CLIENT = 1_000;
const INSTANCE = 2_500;

async function refusal(promise: Promise<unknown>): Promise<AppError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(AppError);
  return error as AppError;
}

function refusalOf(hold: () => void): AppError {
  try {
    hold();
  } catch (error) {
    expect(error).toBeInstanceOf(AppError);
    return error as AppError;
  }
  throw new Error('the hold was not refused');
}

/** A request as a socket delivers it: written by the test piece by piece, with the headers a client sent. */
function requestFrom(budget: BodyBudget, client: string, headers: Record<string, string>): { req: IncomingMessage; lease: BodyLease; body: PassThrough } {
  const body = new PassThrough();
  const req = body as unknown as IncomingMessage;
  req.headers = { 'content-type': 'application/json', ...headers };
  const lease = budget.lease(client);
  attachBodyLease(req, lease);
  return { req, lease, body };
}

const tick = () => new Promise((resolve) => setImmediate(resolve));

describe('the body budget', () => {
  it('holds per client and for the instance, refusing with 429 or 503 and Retry-After, holding nothing for a refusal', () => {
    const budget = createBodyBudget({ instanceBytes: INSTANCE, perClientBytes: PER_CLIENT });
    const a1 = budget.lease('a');
    a1.hold(600);
    a1.hold(300);
    // Never down: a reader holds the declared length, then the bytes as they come.
    a1.hold(100);
    expect(budget.heldBytes('a')).toBe(600);
    const a2 = budget.lease('a');
    a2.hold(400);
    const perClient = refusalOf(() => a2.hold(401));
    expect(perClient.code).toBe('RATE_LIMITED');
    expect(perClient.headers['Retry-After']).toMatch(/^\d+$/);
    expect(budget.heldBytes('a')).toBe(1_000);

    const b = budget.lease('b');
    b.hold(1_000);
    const c = budget.lease('c');
    const instance = refusalOf(() => c.hold(501));
    expect(instance.code).toBe('SERVICE_UNAVAILABLE');
    expect(instance.headers['Retry-After']).toMatch(/^\d+$/);
    expect(budget.heldBytes('c')).toBe(0);
    c.hold(500);
    expect(budget.heldBytes()).toBe(INSTANCE);
  });

  it("admits a client's only body above the per-client budget (an upload), but nothing beside it", () => {
    const budget = createBodyBudget({ instanceBytes: INSTANCE, perClientBytes: PER_CLIENT });
    const upload = budget.lease('a');
    upload.hold(2_000);
    upload.hold(2_200);
    expect(refusalOf(() => budget.lease('a').hold(1)).code).toBe('RATE_LIMITED');
    upload.release();
    budget.lease('a').hold(PER_CLIENT);
  });

  it('releases exactly once: a second release, or the release of another lease, never gives back more', () => {
    const budget = createBodyBudget({ instanceBytes: INSTANCE, perClientBytes: PER_CLIENT });
    const a1 = budget.lease('a');
    const a2 = budget.lease('a');
    a1.hold(300);
    a2.hold(200);
    a1.release();
    a1.release();
    expect(budget.heldBytes('a')).toBe(200);
    expect(budget.heldBytes()).toBe(200);
    a2.release();
    expect(budget.heldBytes()).toBe(0);
    // A released lease holds nothing more: the exchange it belonged to is over.
    expect(refusalOf(() => a1.hold(10)).code).toBe('BAD_REQUEST');
    expect(budget.heldBytes()).toBe(0);
  });
});

describe('reading a body on the budget', () => {
  it('holds the declared length before a byte is read, and the body until the exchange releases it', async () => {
    const budget = createBodyBudget({ instanceBytes: INSTANCE, perClientBytes: PER_CLIENT });
    const { req, lease, body } = requestFrom(budget, 'a', { 'content-length': '7' });
    const read = readJsonBody(req, 100);
    expect(budget.heldBytes('a')).toBe(7);
    body.end('{"a":1}');
    expect(await read).toEqual({ a: 1 });
    expect(budget.heldBytes('a')).toBe(7);
    lease.release();
    expect(budget.heldBytes()).toBe(0);
  });

  it('holds a chunked body as it arrives and refuses it when the instance is full, releasing what it held', async () => {
    const budget = createBodyBudget({ instanceBytes: INSTANCE, perClientBytes: PER_CLIENT });
    budget.lease('other').hold(INSTANCE - 500);
    const { req, body } = requestFrom(budget, 'a', {});
    const read = readBodyBytes(req, 10_000);
    body.write(Buffer.alloc(400));
    await tick();
    expect(budget.heldBytes('a')).toBe(400);
    body.write(Buffer.alloc(400));
    expect((await refusal(read)).code).toBe('SERVICE_UNAVAILABLE');
    expect(budget.heldBytes('a')).toBe(0);
  });

  it('refuses a body that does not fit before reading it', async () => {
    const budget = createBodyBudget({ instanceBytes: INSTANCE, perClientBytes: PER_CLIENT });
    budget.lease('a').hold(600);
    const { req, body } = requestFrom(budget, 'a', { 'content-length': '500' });
    const error = await refusal(readJsonBody(req, 10_000));
    expect(error.code).toBe('RATE_LIMITED');
    expect(body.readableFlowing).not.toBe(true);
    expect(budget.heldBytes('a')).toBe(600);
  });

  it('releases on every way a read ends early: over the cap, the client gone, already gone', async () => {
    const budget = createBodyBudget({ instanceBytes: INSTANCE, perClientBytes: PER_CLIENT });
    const over = requestFrom(budget, 'a', {});
    const overRead = readBodyBytes(over.req, 100);
    over.body.write(Buffer.alloc(101));
    expect((await refusal(overRead)).code).toBe('PAYLOAD_TOO_LARGE');

    const aborted = requestFrom(budget, 'a', { 'content-length': '900' });
    const abortedRead = readBodyBytes(aborted.req, 1_000);
    aborted.body.write(Buffer.alloc(300));
    aborted.body.destroy(new Error('aborted'));
    expect((await refusal(abortedRead)).message).toBe('Incomplete request body');

    const gone = requestFrom(budget, 'a', { 'content-length': '900' });
    gone.body.on('error', () => {});
    gone.body.destroy(new Error('aborted'));
    expect((await refusal(readBodyBytes(gone.req, 1_000))).message).toBe('Incomplete request body');
    expect(budget.heldBytes()).toBe(0);
  });

  it('keeps no chunk once the body is read, though the request lives on (it does until the answer is sent)', async () => {
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    const budget = createBodyBudget({ instanceBytes: 10_000_000, perClientBytes: 10_000_000 });
    const { req, body } = requestFrom(budget, 'a', {});
    const read = readBodyBytes(req, 10_000_000);
    const watched = (() => {
      const chunk = Buffer.alloc(1_000_000, 1);
      body.write(chunk);
      return new WeakRef(chunk);
    })();
    body.end(Buffer.alloc(1_000, 2));
    const bytes = await read;
    expect(bytes.length).toBe(1_001_000);
    await tick();
    gc();
    expect(watched.deref()).toBeUndefined();
    expect(req.listenerCount('data')).toBe(0);
  });

  it('is never done outside the budget', async () => {
    const req = new PassThrough() as unknown as IncomingMessage;
    req.headers = {};
    await expect(readBodyBytes(req, 100)).rejects.toThrow(/without a body lease/);
  });
});
