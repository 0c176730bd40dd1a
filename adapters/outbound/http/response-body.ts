/**
 * Reading a response: its body decoded (gzip, deflate, br) and capped after decompression while it streams, and
 * every way the body can end early (cap, deadline, abort, reset) turned into the exchange's one failure.
 */
import type http from 'node:http';
import { Transform, type Readable } from 'node:stream';
import zlib from 'node:zlib';
import type { Exchange } from './exchange.ts';
import { OutboundError } from './outbound-error.ts';

export interface Opened {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Readable;
  url: string;
  origin: string;
  exchange: Exchange;
}

export function wireBody(
  res: http.IncomingMessage,
  req: http.ClientRequest,
  exchange: Exchange,
  ctx: { origin: string; url: string; method: string; maxBytes: number },
): Opened {
  const status = res.statusCode ?? 0;
  const headers: Record<string, string | string[] | undefined> = { ...res.headers };

  res.on('error', (err) => exchange.fail(err));
  res.on('close', () => {
    if (!res.complete) {
      exchange.fail(new OutboundError('connection_failed', `connection to ${ctx.origin} closed before the response was complete`));
    }
  });

  // HEAD, 204 and 304 carry no body, whatever Content-Length/-Encoding they declare.
  const hasBody = ctx.method !== 'HEAD' && status !== 204 && status !== 304;
  let source: Readable = res;
  if (hasBody) {
    const codings = decodableCodings(res.headers['content-encoding']);
    if (codings !== null && codings.length > 0) {
      // Decoded body: the encoding and length headers no longer describe it.
      delete headers['content-encoding'];
      delete headers['content-length'];
      for (const coding of [...codings].reverse()) {
        const decoder = createDecoder(coding);
        decoder.on('error', () => {
          exchange.fail(new OutboundError('connection_failed', `could not decode the ${coding} response body from ${ctx.origin}`));
        });
        exchange.onFail(() => decoder.destroy());
        source = source.pipe(decoder);
      }
    } else {
      const declared = Number(res.headers['content-length']);
      if (Number.isFinite(declared) && declared > ctx.maxBytes) exchange.fail(tooLarge(ctx.origin, ctx.maxBytes));
    }
  }

  // Counts bytes after decompression; the first chunk over the cap tears the
  // exchange down, so a compression bomb is never inflated beyond ~cap + one chunk.
  let received = 0;
  let ended = false;
  const limiter = new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      received += chunk.length;
      if (received > ctx.maxBytes) {
        exchange.fail(tooLarge(ctx.origin, ctx.maxBytes));
        return;
      }
      callback(null, chunk);
    },
  });
  // An upstream failing must never crash the process through an unhandled
  // 'error' event; consumers still receive the error through their own listeners.
  limiter.on('error', () => undefined);
  limiter.on('end', () => {
    ended = true;
    exchange.complete();
  });
  limiter.on('close', () => {
    if (!ended) exchange.fail(new OutboundError('aborted', `response body from ${ctx.origin} was closed before it was read`));
  });
  exchange.onFail((err) => {
    req.destroy(err);
    limiter.destroy(err);
  });
  source.pipe(limiter);

  return { status, headers, body: limiter, url: ctx.url, origin: ctx.origin, exchange };
}

/** Codings to undo, outermost last; null when any coding is unknown (the raw bytes are then returned). */
function decodableCodings(header: string | undefined): string[] | null {
  if (header === undefined) return [];
  const codings = header
    .split(',')
    .map((c) => c.trim().toLowerCase())
    .filter((c) => c !== '' && c !== 'identity');
  const known = ['gzip', 'x-gzip', 'deflate', 'br'];
  // More than a few layers is not something a legitimate server sends.
  if (codings.length > 3 || codings.some((c) => !known.includes(c))) return null;
  return codings;
}

function createDecoder(coding: string): Transform {
  // Lenient flush like browsers: a truncated but otherwise valid stream yields what it has.
  if (coding === 'br') return zlib.createBrotliDecompress({ finishFlush: zlib.constants.BROTLI_OPERATION_FLUSH });
  if (coding === 'deflate') return createDeflateDecoder();
  return zlib.createGunzip({ finishFlush: zlib.constants.Z_SYNC_FLUSH });
}

/** HTTP "deflate" should be zlib-wrapped, but some servers send raw deflate; sniff the zlib header. */
function createDeflateDecoder(): Transform {
  let inner: zlib.Inflate | zlib.InflateRaw | null = null;
  const outer = new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      if (inner === null) {
        const b0 = chunk[0] ?? 0;
        const b1 = chunk[1] ?? 0;
        const zlibWrapped = (b0 & 0x0f) === 8 && (b0 * 256 + b1) % 31 === 0;
        inner = zlibWrapped
          ? zlib.createInflate({ finishFlush: zlib.constants.Z_SYNC_FLUSH })
          : zlib.createInflateRaw({ finishFlush: zlib.constants.Z_SYNC_FLUSH });
        inner.on('data', (out: Buffer) => {
          if (!outer.push(out)) inner?.pause();
        });
        inner.on('error', (err) => outer.destroy(err));
      }
      if (inner.write(chunk)) callback();
      else inner.once('drain', () => callback());
    },
    flush(callback) {
      if (inner === null) return callback();
      inner.once('end', () => callback());
      inner.end();
    },
    read(size) {
      inner?.resume();
      Transform.prototype._read.call(this, size);
    },
    destroy(err, callback) {
      inner?.destroy();
      callback(err);
    },
  });
  return outer;
}

function tooLarge(origin: string, maxBytes: number): OutboundError {
  return new OutboundError('response_too_large', `response from ${origin} exceeds ${maxBytes} bytes`);
}
