/**
 * Server-sent events (text/event-stream) parser, following the WHATWG
 * "event stream interpretation" rules:
 *  - lines end with CRLF, LF or CR, and may be split anywhere across chunks
 *    (including between the CR and the LF of one CRLF, and inside a UTF-8
 *    sequence when fed bytes);
 *  - a line starting with ':' is a comment;
 *  - 'field: value' (one leading space of the value dropped), 'field' alone
 *    means an empty value; several `data:` lines of one event are joined by '\n';
 *  - an empty line dispatches the event; an event without any `data:` line is
 *    dropped.
 * One leniency: data still pending when the stream ends is dispatched (the
 * specification drops it), since some providers omit the final blank line.
 */
import { StringDecoder } from 'node:string_decoder';

export interface SseEvent {
  /** The `event:` field, 'message' when absent. */
  event: string;
  data: string;
  /** Last `id:` seen so far on the stream (it persists across events), or undefined. */
  id: string | undefined;
  /** `retry:` of this event, in ms. */
  retry: number | undefined;
}

export class SseParser {
  private readonly decoder = new StringDecoder('utf8');
  private buffer = '';
  /** The previous chunk ended with '\r': a '\n' opening the next one belongs to it. */
  private pendingCr = false;
  private started = false;
  private dataLines: string[] = [];
  private hasData = false;
  private eventType = '';
  private lastId: string | undefined;
  private retry: number | undefined;

  /** Feeds a chunk; returns the events it completed, in order. */
  push(chunk: string | Uint8Array): SseEvent[] {
    let text = typeof chunk === 'string' ? chunk : this.decoder.write(Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength));
    if (text === '') return [];
    if (!this.started) {
      this.started = true;
      if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
    }
    if (this.pendingCr) {
      this.pendingCr = false;
      if (text.startsWith('\n')) text = text.slice(1);
    }
    // The kept remainder holds no line break: scan only the new text.
    const scanFrom = this.buffer.length;
    this.buffer += text;
    const events: SseEvent[] = [];
    let start = 0;
    for (let i = scanFrom; i < this.buffer.length; i += 1) {
      const ch = this.buffer.charCodeAt(i);
      if (ch !== 10 && ch !== 13) continue;
      this.processLine(this.buffer.slice(start, i), events);
      if (ch === 13) {
        if (i + 1 < this.buffer.length) {
          if (this.buffer.charCodeAt(i + 1) === 10) i += 1;
        } else {
          this.pendingCr = true;
        }
      }
      start = i + 1;
    }
    this.buffer = this.buffer.slice(start);
    return events;
  }

  /** Ends the stream: flushes a trailing line and dispatches pending data (see the module note). */
  end(): SseEvent[] {
    const events: SseEvent[] = [];
    const rest = this.buffer + this.decoder.end();
    this.buffer = '';
    if (rest !== '') this.processLine(rest, events);
    this.dispatch(events);
    return events;
  }

  private processLine(line: string, events: SseEvent[]): void {
    if (line === '') {
      this.dispatch(events);
      return;
    }
    if (line.startsWith(':')) return;
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    switch (field) {
      case 'data':
        this.dataLines.push(value);
        this.hasData = true;
        break;
      case 'event':
        this.eventType = value;
        break;
      case 'id':
        if (!value.includes('\0')) this.lastId = value;
        break;
      case 'retry':
        if (/^\d+$/.test(value)) this.retry = Number(value);
        break;
      default:
        // Unknown fields are ignored.
        break;
    }
  }

  private dispatch(events: SseEvent[]): void {
    if (this.hasData) {
      events.push({ event: this.eventType === '' ? 'message' : this.eventType, data: this.dataLines.join('\n'), id: this.lastId, retry: this.retry });
    }
    this.dataLines = [];
    this.hasData = false;
    this.eventType = '';
    this.retry = undefined;
  }
}

/** Parses a byte or text stream (e.g. a Node Readable) into events. */
export async function* parseSse(source: AsyncIterable<string | Uint8Array>): AsyncGenerator<SseEvent> {
  const parser = new SseParser();
  for await (const chunk of source) {
    for (const event of parser.push(chunk)) yield event;
  }
  for (const event of parser.end()) yield event;
}
