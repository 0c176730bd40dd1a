import type { IncomingMessage } from 'node:http';
import { AppError } from '../../schema/errors.ts';

/** JSON is UTF-8 (RFC 8259): invalid bytes are refused, not silently replaced with U+FFFD. */
const utf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * Reads a JSON body, refusing oversize bodies from Content-Length before reading, or as soon as the stream passes
 * the cap. A refused body is left flowing, never destroyed: the client is still sending, and a reset would hide
 * the 413 from it (Node's server discards the rest, within the dispatcher's linger budget).
 */
export async function readJsonBody(req: IncomingMessage, limitBytes: number): Promise<unknown> {
  const raw = await readBodyBytes(req, limitBytes);
  if (raw.length === 0) return undefined;
  const type = (req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
  if (type !== 'application/json' && !type.endsWith('+json')) {
    throw new AppError('UNSUPPORTED_MEDIA_TYPE', 'Unsupported content type', 'Send Content-Type: application/json');
  }
  const text = jsonText(raw);
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new AppError('MALFORMED_JSON', 'Malformed JSON body', (error as Error).message);
  }
}

/** A JSON body's text, for an adapter that parses it itself (tRPC): the same cap and the same refusal of invalid UTF-8. */
export async function readJsonText(req: IncomingMessage, limitBytes: number): Promise<string> {
  return jsonText(await readBodyBytes(req, limitBytes));
}

function jsonText(raw: Buffer): string {
  try {
    return utf8.decode(raw);
  } catch {
    throw new AppError('MALFORMED_JSON', 'Malformed JSON body', 'The body is not valid UTF-8');
  }
}

/** The body as UTF-8 text, exactly as sent (a signature is computed over these bytes), under the same cap. */
export async function readRawTextBody(req: IncomingMessage, limitBytes: number): Promise<string> {
  try {
    return utf8.decode(await readBodyBytes(req, limitBytes));
  } catch (error) {
    if (error instanceof AppError) throw error;
    throw new AppError('BAD_REQUEST', 'Malformed body', 'The body is not valid UTF-8');
  }
}

async function readBodyBytes(req: IncomingMessage, limitBytes: number): Promise<Buffer> {
  const declared = Number(req.headers['content-length'] ?? NaN);
  const tooLarge = () => new AppError('PAYLOAD_TOO_LARGE', 'Request body too large', `Bodies are limited to ${limitBytes} bytes`);
  if (declared > limitBytes) throw tooLarge();
  const raw = await new Promise<Buffer>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limitBytes) {
        chunks.length = 0;
        req.off('data', onData);
        req.resume();
        reject(tooLarge());
        return;
      }
      chunks.push(chunk);
    };
    req.on('data', onData);
    req.once('end', () => resolve(Buffer.concat(chunks)));
    req.once('error', () => reject(new AppError('BAD_REQUEST', 'Incomplete request body', 'The connection closed before the body was complete')));
  });
  return raw;
}
