import type { IncomingMessage } from 'node:http';
import { AppError } from '../../schema/errors.ts';

/** JSON is UTF-8 (RFC 8259): invalid bytes are refused, not silently replaced with U+FFFD. */
const utf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * When a client refused for lack of room may try again. Room comes back as bodies complete, are abandoned or stop
 * arriving (BODY_IDLE_TIMEOUT_MS), which no count predicts: a few seconds keeps retries from spinning.
 */
const BODY_BUDGET_RETRY_AFTER_SECONDS = 5;

/** A body the client stopped sending (the connection closed, or the exchange ended before it was read). */
export const incompleteBody = () => new AppError('BAD_REQUEST', 'Incomplete request body', 'The connection closed before the body was complete');

/**
 * One request's share of the bytes of request bodies held in memory. A reader holds what it buffers (or the declared
 * Content-Length up front); dispatch releases the share when the exchange ends, and a reader that drops what it read
 * releases it at once.
 */
export interface BodyLease {
  /** Brings this request's share up to `bytes` (never down); throws the 429 or 503 when that does not fit, holding nothing more. */
  hold(bytes: number): void;
  /** Gives the whole share back. Only the first call counts, and the lease holds nothing after it. */
  release(): void;
}

export interface BodyBudget {
  /** A lease for one request of `client` (its rate-limit key: clientKey of its IP). */
  lease(client: string): BodyLease;
  /** Bytes held now by every request, or by one client's. */
  heldBytes(client?: string): number;
}

/**
 * Bytes of request bodies held at once: by the whole instance (then 503) and by one client (then 429). Without it a
 * client that sends most of a body and stalls holds that part for the whole request deadline, on as many
 * connections as it opens. A client's only body always fits its own budget (an enterprise upload is 100 MB, above
 * the default 32 MiB); more bodies from it at once share the budget.
 */
export function createBodyBudget(limits: { instanceBytes: number; perClientBytes: number }): BodyBudget {
  let total = 0;
  const byClient = new Map<string, number>();
  return {
    heldBytes: (client) => (client === undefined ? total : (byClient.get(client) ?? 0)),
    lease(client) {
      let held = 0;
      let open = true;
      return {
        hold(bytes) {
          if (!open) throw incompleteBody();
          const more = bytes - held;
          if (more <= 0) return;
          const clientHeld = byClient.get(client) ?? 0;
          if (clientHeld > held && clientHeld + more > limits.perClientBytes) {
            throw new AppError(
              'RATE_LIMITED',
              'Too many request bodies in progress',
              `This client's request bodies in progress are limited to ${limits.perClientBytes} bytes together; retry after ${BODY_BUDGET_RETRY_AFTER_SECONDS} s`,
              { 'Retry-After': String(BODY_BUDGET_RETRY_AFTER_SECONDS) },
            );
          }
          if (total + more > limits.instanceBytes) {
            throw new AppError(
              'SERVICE_UNAVAILABLE',
              'Service busy',
              `Too many request bodies are in progress; retry after ${BODY_BUDGET_RETRY_AFTER_SECONDS} s`,
              { 'Retry-After': String(BODY_BUDGET_RETRY_AFTER_SECONDS) },
            );
          }
          total += more;
          byClient.set(client, clientHeld + more);
          held = bytes;
        },
        release() {
          if (!open) return;
          open = false;
          if (held === 0) return;
          total -= held;
          const left = (byClient.get(client) ?? 0) - held;
          // Emptied clients are forgotten, so addresses that come and go leave no entries behind.
          if (left > 0) byClient.set(client, left);
          else byClient.delete(client);
          held = 0;
        },
      };
    },
  };
}

const leases = new WeakMap<IncomingMessage, BodyLease>();

/** Dispatch gives every request its lease before an adapter sees it; every reader below holds what it buffers on it. */
export function attachBodyLease(req: IncomingMessage, lease: BodyLease): void {
  leases.set(req, lease);
}

/** The lease `req` holds its body's bytes on (the readers here, and multipart's). */
export function bodyLeaseOf(req: IncomingMessage): BodyLease {
  const lease = leases.get(req);
  // Reading a body outside the budget is the defect the budget exists for: fail loudly rather than read unbounded.
  if (!lease) throw new Error('A request body was read without a body lease (dispatch attaches one to every request)');
  return lease;
}

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

/**
 * The body's bytes under the cap and the request's body lease (the declared length held before anything is read).
 * Whatever way it ends, the listeners are removed and the chunks dropped: the request object lives until its
 * response is sent (for a stream, minutes), and chunks its listeners still reached would be held beside the copy
 * returned, or after an abort beside nothing.
 */
export async function readBodyBytes(req: IncomingMessage, limitBytes: number): Promise<Buffer> {
  const lease = bodyLeaseOf(req);
  const declared = Number(req.headers['content-length'] ?? NaN);
  const tooLarge = () => new AppError('PAYLOAD_TOO_LARGE', 'Request body too large', `Bodies are limited to ${limitBytes} bytes`);
  if (declared > limitBytes) throw tooLarge();
  if (declared > 0) lease.hold(declared);
  // Destroyed before this read began (the client left while the caller was resolved): no 'end' or 'error' would come.
  if (req.destroyed) {
    lease.release();
    throw incompleteBody();
  }
  return new Promise<Buffer>((resolve, reject) => {
    let chunks: Buffer[] = [];
    let size = 0;
    const detach = () => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
    };
    const fail = (error: AppError) => {
      detach();
      chunks = [];
      lease.release();
      req.resume();
      reject(error);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limitBytes) return fail(tooLarge());
      try {
        lease.hold(size);
      } catch (error) {
        return fail(error as AppError);
      }
      chunks.push(chunk);
    };
    const onEnd = () => {
      detach();
      const body = Buffer.concat(chunks, size);
      chunks = [];
      resolve(body);
    };
    const onError = () => fail(incompleteBody());
    req.on('data', onData);
    req.once('end', onEnd);
    req.once('error', onError);
  });
}
