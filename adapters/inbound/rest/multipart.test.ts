import type { IncomingMessage } from 'node:http';
import { Readable } from 'node:stream';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { describe, expect, it } from 'vitest';
import { AppError } from '../../../schema/errors.ts';
import { attachBodyLease, type BodyBudget, createBodyBudget } from '../request-body.ts';
import { readMultipart } from './multipart.ts';

const BOUNDARY = 'test-boundary-7d1f';

/** A request carrying `body` as multipart/form-data, streamed in small pieces as a socket delivers it, on a body budget as dispatch gives it one. */
function requestOf(body: Buffer, budget: BodyBudget = createBodyBudget({ instanceBytes: 1e9, perClientBytes: 1e9 })): IncomingMessage {
  const pieces: Buffer[] = [];
  for (let i = 0; i < body.length; i += 1000) pieces.push(body.subarray(i, i + 1000));
  const req = Readable.from(pieces) as unknown as IncomingMessage;
  req.headers = { 'content-type': `multipart/form-data; boundary=${BOUNDARY}`, 'content-length': String(body.length) };
  attachBodyLease(req, budget.lease('client'));
  return req;
}

function multipart(parts: Array<{ name: string; value: string | Buffer; fileName?: string }>): Buffer {
  const chunks: Buffer[] = [];
  for (const part of parts) {
    const disposition = part.fileName === undefined ? `form-data; name="${part.name}"` : `form-data; name="${part.name}"; filename="${part.fileName}"`;
    chunks.push(
      Buffer.from(`--${BOUNDARY}\r\nContent-Disposition: ${disposition}\r\n${part.fileName === undefined ? '' : 'Content-Type: text/plain\r\n'}\r\n`),
    );
    chunks.push(Buffer.isBuffer(part.value) ? part.value : Buffer.from(part.value));
    chunks.push(Buffer.from('\r\n'));
  }
  chunks.push(Buffer.from(`--${BOUNDARY}--\r\n`));
  return Buffer.concat(chunks);
}

async function refusal(promise: Promise<unknown>): Promise<AppError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(AppError);
  return error as AppError;
}

describe('readMultipart', () => {
  const maxBytes = 5_000;

  it('takes a file of exactly the limit', async () => {
    const bytes = Buffer.alloc(maxBytes, 'a');
    const fields = await readMultipart(requestOf(multipart([{ name: 'file', value: bytes, fileName: 'a.txt' }])), { fileField: 'file', maxBytes });
    expect((fields.file as { bytes: Buffer }).bytes.equals(bytes)).toBe(true);
  });

  it('refuses a file one byte over the limit with 413', async () => {
    const body = multipart([{ name: 'file', value: Buffer.alloc(maxBytes + 1, 'a'), fileName: 'a.txt' }]);
    const error = await refusal(readMultipart(requestOf(body), { fileField: 'file', maxBytes }));
    expect(error.code).toBe('PAYLOAD_TOO_LARGE');
  });

  it('holds the body on the budget while the procedure has it, and gives it back when the parse fails', async () => {
    const budget = createBodyBudget({ instanceBytes: 100_000, perClientBytes: 100_000 });
    const body = multipart([{ name: 'file', value: Buffer.alloc(1_000, 'a'), fileName: 'a.txt' }]);
    await readMultipart(requestOf(body, budget), { fileField: 'file', maxBytes });
    expect(budget.heldBytes('client')).toBe(body.length);

    const other = createBodyBudget({ instanceBytes: 100_000, perClientBytes: 100_000 });
    const over = multipart([{ name: 'file', value: Buffer.alloc(maxBytes + 1, 'a'), fileName: 'a.txt' }]);
    expect((await refusal(readMultipart(requestOf(over, other), { fileField: 'file', maxBytes }))).code).toBe('PAYLOAD_TOO_LARGE');
    const cut = multipart([{ name: 'file', value: Buffer.alloc(1_000, 'a'), fileName: 'a.txt' }]).subarray(0, 800);
    expect((await refusal(readMultipart(requestOf(cut, other), { fileField: 'file', maxBytes }))).code).toBe('BAD_REQUEST');
    expect(other.heldBytes()).toBe(0);
  });

  it('refuses an upload that does not fit the budget before reading it', async () => {
    const budget = createBodyBudget({ instanceBytes: 100_000, perClientBytes: 1_000 });
    budget.lease('client').hold(500);
    const body = multipart([{ name: 'file', value: Buffer.alloc(1_000, 'a'), fileName: 'a.txt' }]);
    const error = await refusal(readMultipart(requestOf(body, budget), { fileField: 'file', maxBytes }));
    expect(error.code).toBe('RATE_LIMITED');
    expect(error.headers['Retry-After']).toMatch(/^\d+$/);
    expect(budget.heldBytes('client')).toBe(500);
  });

  it('keeps nothing of a file refused part-way, though the request lives on while the rest of it is drained', async () => {
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    const head = multipart([{ name: 'file', value: '<file>', fileName: 'a.txt' }])
      .toString('latin1')
      .split('<file>')[0]!;
    const part = 1_000_000;
    let arrived: WeakRef<ArrayBuffer> | undefined;
    function* pieces() {
      yield Buffer.from(head, 'latin1');
      const first = Buffer.alloc(part, 'a');
      arrived = new WeakRef(first.buffer);
      yield first;
      // Past the cap: refused here, while the client is still sending.
      yield Buffer.alloc(part, 'a');
    }
    const req = Readable.from(pieces()) as unknown as IncomingMessage;
    req.headers = { 'content-type': `multipart/form-data; boundary=${BOUNDARY}` };
    attachBodyLease(req, createBodyBudget({ instanceBytes: 1e9, perClientBytes: 1e9 }).lease('client'));
    expect((await refusal(readMultipart(req, { fileField: 'file', maxBytes: 1.5 * part }))).code).toBe('PAYLOAD_TOO_LARGE');
    await new Promise((resolve) => setImmediate(resolve));
    gc();
    expect(arrived?.deref()).toBeUndefined();
  });

  it('says the part limit was passed rather than that the file is missing', async () => {
    const fields = Array.from({ length: 30 }, (_, i) => ({ name: `f${i}`, value: 'x' }));
    const body = multipart([...fields, { name: 'file', value: 'hello', fileName: 'a.txt' }]);
    const error = await refusal(readMultipart(requestOf(body), { fileField: 'file', maxBytes }));
    expect(error.code).toBe('BAD_REQUEST');
    expect(error.details).toMatch(/At most 20 fields|At most 25 parts/);
  });
});
