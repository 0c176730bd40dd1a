import type { IncomingMessage } from 'node:http';
import busboy from 'busboy';
import { AppError } from '../../../schema/errors.ts';
import type { UploadedFile } from '../../../schema/uploads.ts';
import { bodyLeaseOf, incompleteBody } from '../request-body.ts';

const MAX_FIELDS = 20;
const MAX_PARTS = 25;

/**
 * Parses multipart/form-data with one file field. The size cap is enforced while the upload streams:
 * the request is refused with 413 as soon as the file passes it, before the rest of the body is read.
 * The body's bytes are held on the request's body lease (the declared length before anything is read, so an upload
 * that cannot fit is refused at once), and released as soon as the parse fails.
 */
export function readMultipart(req: IncomingMessage, options: { fileField: string; maxBytes: number }): Promise<Record<string, unknown>> {
  const type = req.headers['content-type'] ?? '';
  if (!/^multipart\/form-data/i.test(type)) {
    return Promise.reject(
      new AppError('UNSUPPORTED_MEDIA_TYPE', 'Unsupported content type', `Send multipart/form-data with a "${options.fileField}" file part`),
    );
  }
  const declared = Number(req.headers['content-length'] ?? NaN);
  // The multipart framing adds a little; anything beyond cap + 64 KiB cannot hold a valid file.
  if (declared > options.maxBytes + 64 * 1024) {
    return Promise.reject(new AppError('PAYLOAD_TOO_LARGE', 'File too large', `${options.fileField}: at most ${options.maxBytes} bytes`));
  }
  const lease = bodyLeaseOf(req);
  try {
    if (declared > 0) lease.hold(declared);
  } catch (error) {
    return Promise.reject(error);
  }
  if (req.destroyed) {
    lease.release();
    return Promise.reject(incompleteBody());
  }
  return new Promise((resolve, reject) => {
    const fields: Record<string, unknown> = {};
    let file: UploadedFile | undefined;
    // The file's chunks, dropped once copied into the file or once the parse fails: the parser's listeners keep this
    // scope alive as long as the request object, which outlives the read (the procedure runs, the answer is sent).
    let chunks: Buffer[] = [];
    let received = 0;
    let settled = false;
    const detach = () => {
      settled = true;
      chunks = [];
      req.off('data', count);
      req.off('error', onRequestError);
    };
    const fail = (error: AppError) => {
      if (settled) return;
      detach();
      req.unpipe(parser);
      req.resume();
      lease.release();
      reject(error);
    };
    const count = (chunk: Buffer) => {
      received += chunk.length;
      try {
        lease.hold(received);
      } catch (error) {
        fail(error as AppError);
      }
    };
    const onRequestError = () => fail(incompleteBody());
    let parser: busboy.Busboy;
    try {
      // busboy reports its limit when a file reaches it, so a file of exactly maxBytes would be refused: the limit
      // given is one more, which only a file over maxBytes reaches.
      parser = busboy({
        headers: req.headers,
        limits: { fileSize: options.maxBytes + 1, files: 1, fields: MAX_FIELDS, fieldSize: 64 * 1024, parts: MAX_PARTS },
      });
    } catch {
      lease.release();
      reject(new AppError('BAD_REQUEST', 'Malformed multipart body', 'missing boundary'));
      return;
    }
    parser.on('field', (name, value) => {
      fields[name] = value;
    });
    parser.on('file', (name, stream, info) => {
      if (name !== options.fileField) {
        stream.on('error', () => {});
        stream.resume();
        return;
      }
      // A body cut off inside the file part errors this stream as well as the parser; unhandled, it ends the process.
      stream.on('error', () => fail(new AppError('BAD_REQUEST', 'Malformed multipart body', 'The body ended before the file part was complete')));
      stream.on('data', (chunk: Buffer) => {
        if (!settled) chunks.push(chunk);
      });
      stream.on('limit', () => fail(new AppError('PAYLOAD_TOO_LARGE', 'File too large', `${options.fileField}: at most ${options.maxBytes} bytes`)));
      stream.on('end', () => {
        if (settled) return;
        file = { fileName: info.filename ?? 'upload', mimeType: info.mimeType, bytes: Buffer.concat(chunks) };
        chunks = [];
      });
    });
    parser.on('filesLimit', () => fail(new AppError('BAD_REQUEST', 'Only one file per request')));
    // Past the part limit busboy stops reading, so a file after it would be reported missing; past the field limit it
    // drops fields silently. No form of ours comes near either: say what happened rather than guess.
    parser.on('fieldsLimit', () => fail(new AppError('BAD_REQUEST', 'Malformed multipart body', `At most ${MAX_FIELDS} fields`)));
    parser.on('partsLimit', () => fail(new AppError('BAD_REQUEST', 'Malformed multipart body', `At most ${MAX_PARTS} parts`)));
    parser.on('error', () => fail(new AppError('BAD_REQUEST', 'Malformed multipart body', 'The body is not complete multipart/form-data')));
    req.on('error', onRequestError);
    parser.on('close', () => {
      if (settled) return;
      if (!file) return fail(new AppError('VALIDATION_FAILED', 'Invalid request parameters', `${options.fileField}: a file is required`));
      detach();
      resolve({ ...fields, [options.fileField]: file });
    });
    req.on('data', count);
    req.pipe(parser);
  });
}
