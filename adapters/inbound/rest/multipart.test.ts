import type { IncomingMessage } from 'node:http';
import { Readable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { AppError } from '../../../schema/errors.ts';
import { readMultipart } from './multipart.ts';

const BOUNDARY = 'test-boundary-7d1f';

/** A request carrying `body` as multipart/form-data, streamed in small pieces as a socket delivers it. */
function requestOf(body: Buffer): IncomingMessage {
  const pieces: Buffer[] = [];
  for (let i = 0; i < body.length; i += 1000) pieces.push(body.subarray(i, i + 1000));
  const req = Readable.from(pieces) as unknown as IncomingMessage;
  req.headers = { 'content-type': `multipart/form-data; boundary=${BOUNDARY}`, 'content-length': String(body.length) };
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

  it('says the part limit was passed rather than that the file is missing', async () => {
    const fields = Array.from({ length: 30 }, (_, i) => ({ name: `f${i}`, value: 'x' }));
    const body = multipart([...fields, { name: 'file', value: 'hello', fileName: 'a.txt' }]);
    const error = await refusal(readMultipart(requestOf(body), { fileField: 'file', maxBytes }));
    expect(error.code).toBe('BAD_REQUEST');
    expect(error.details).toMatch(/At most 20 fields|At most 25 parts/);
  });
});
