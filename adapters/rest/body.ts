import type { IncomingMessage } from 'node:http';
import { AppError } from '../../schema/errors.ts';

/** Reads a JSON body, refusing oversize bodies from Content-Length before reading, or as soon as the stream passes the cap. */
export async function readJsonBody(req: IncomingMessage, limitBytes: number): Promise<unknown> {
  const declared = Number(req.headers['content-length'] ?? NaN);
  const tooLarge = () => new AppError('PAYLOAD_TOO_LARGE', 'Request body too large', `JSON bodies are limited to ${limitBytes} bytes`);
  if (declared > limitBytes) throw tooLarge();
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > limitBytes) throw tooLarge();
    chunks.push(chunk as Buffer);
  }
  if (size === 0) return undefined;
  const type = (req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
  if (type !== 'application/json' && !type.endsWith('+json')) {
    throw new AppError('UNSUPPORTED_MEDIA_TYPE', 'Unsupported content type', 'Send Content-Type: application/json');
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch (error) {
    throw new AppError('MALFORMED_JSON', 'Malformed JSON body', (error as Error).message);
  }
}
