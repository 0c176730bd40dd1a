/**
 * Reading what an AI upstream (connector endpoint, language model, embedding provider) sent back: bodies,
 * JSON paths, token usage, and the short excerpt of an error that may be logged or shown to an owner.
 */
import type { Readable } from 'node:stream';
import { parseUntrustedJson } from '../../../../schema/text-input.ts';

export interface AiUsage {
  promptTokens: number;
  completionTokens: number;
  totalTokens: number;
}

const EXCERPT_MAX_CHARS = 200;

/** Reads a stream as UTF-8 text, stopping once `maxBytes` have arrived. */
export async function readCapped(body: Readable, maxBytes: number): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body as AsyncIterable<Buffer>) {
    chunks.push(chunk);
    size += chunk.length;
    if (size >= maxBytes) break;
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** The parsed JSON, or undefined when the text is not JSON. */
export function parseJson(text: string): unknown {
  try {
    return parseUntrustedJson(text);
  } catch {
    return undefined;
  }
}

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

export function readPath(value: unknown, path: ReadonlyArray<string | number>): unknown {
  let current = value;
  for (const key of path) {
    if (typeof key === 'number') {
      if (!Array.isArray(current)) return undefined;
      current = current[key];
    } else {
      if (!isRecord(current)) return undefined;
      current = current[key];
    }
  }
  return current;
}

export function isCount(value: unknown): value is number {
  return typeof value === 'number' && Number.isInteger(value) && value >= 0;
}

/** Usage from the provider's counts; null unless both prompt and completion are counts. */
export function usageOf(prompt: unknown, completion: unknown, total: unknown): AiUsage | null {
  if (!isCount(prompt) || !isCount(completion)) return null;
  return { promptTokens: prompt, completionTokens: completion, totalTokens: isCount(total) ? total : prompt + completion };
}

/** OpenAI's `usage: {prompt_tokens, completion_tokens, total_tokens}`. */
export function readOpenAiUsage(parsed: unknown): AiUsage | null {
  const usage = readPath(parsed, ['usage']);
  if (!isRecord(usage)) return null;
  return usageOf(usage['prompt_tokens'], usage['completion_tokens'], usage['total_tokens']);
}

/**
 * The error an upstream reported inside a body it answered (`{error: "..."}`, `{error: {message}}`, a lone
 * `{detail}`, Gemini's prompt blocking), as raw text; null when the body reports none.
 */
export function reportedErrorText(parsed: unknown): string | null {
  if (!isRecord(parsed)) return null;
  const error = parsed['error'];
  if (typeof error === 'string' && error !== '') return error;
  if (isRecord(error)) return typeof error['message'] === 'string' ? error['message'] : JSON.stringify(error);
  if (typeof parsed['detail'] === 'string' && Object.keys(parsed).length === 1) return parsed['detail'];
  const blockReason = readPath(parsed, ['promptFeedback', 'blockReason']);
  if (typeof blockReason === 'string') return `the message was blocked (${blockReason})`;
  return null;
}

const REDACTED = '[redacted]';

/**
 * What a reply, an excerpt or an error must not carry: the API key, or several secrets (the key and the
 * credentials written into the endpoint's URL, see {@link requestSecrets}).
 */
export type Secrets = string | ReadonlyArray<string | undefined> | undefined;

/** Query parameters whose value is a credential by their name (`?key=`, `api_key`, `access_token`, `sig`...). */
const CREDENTIAL_PARAMETER = /key|token|secret|sig|pass|auth|credential/i;
/** A URL credential shorter than this is not looked for: too likely to be ordinary text. */
const URL_SECRET_MIN_LENGTH = 8;

/**
 * The API key and the credentials an owner typed into the endpoint's URL itself (its user and password, and the
 * values of query parameters named like a credential): an upstream that echoes its request URL would otherwise
 * hand them to the visitor.
 */
export function requestSecrets(apiKey: string | undefined, url: string): string[] {
  const secrets = apiKey === undefined ? [] : [apiKey];
  let parsed: URL;
  try {
    parsed = new URL(url.trim());
  } catch {
    return secrets;
  }
  // Each value both as the owner wrote it and decoded: an echo may carry either (`+` and `%2f` in a base64 key).
  const candidates = [parsed.username, parsed.password].flatMap((part) => [part, decodedOrSelf(part)]);
  for (const pair of parsed.search.slice(1).split('&')) {
    const at = pair.indexOf('=');
    if (at === -1 || !CREDENTIAL_PARAMETER.test(decodedOrSelf(pair.slice(0, at)))) continue;
    const raw = pair.slice(at + 1);
    candidates.push(raw, decodedOrSelf(raw.replaceAll('+', ' ')));
  }
  for (const candidate of new Set(candidates)) if (candidate.length >= URL_SECRET_MIN_LENGTH) secrets.push(candidate);
  return secrets;
}

function decodedOrSelf(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

/**
 * The forms of the secrets an upstream may echo (raw and URL-encoded), longest first so that a secret holding
 * another is replaced whole; none for a secret too short to match safely.
 */
function keyForms(secrets: Secrets): string[] {
  const list = typeof secrets === 'string' ? [secrets] : (secrets ?? []);
  const forms = new Set<string>();
  for (const secret of list) {
    if (secret === undefined || secret.length < 4) continue;
    forms.add(secret);
    forms.add(encodeURIComponent(secret));
  }
  return [...forms].sort((a, b) => b.length - a.length);
}

/** Replaces the secrets (raw and URL-encoded) wherever an upstream echoed them. */
export function redactKey(text: string, secrets: Secrets): string {
  let out = text;
  for (const form of keyForms(secrets)) out = out.split(form).join(REDACTED);
  return out;
}

/**
 * The key rule for a reply's text, which the visitor reads and the history stores. NUL goes first: the stored
 * text drops it anyway, and a key with NULs inside would come together after the redaction looked for it.
 */
export function redactReply(text: string, secrets: Secrets): string {
  return redactKey(text.replaceAll('\u0000', ''), secrets);
}

/** How long the end of `text` is that some form starts with: a key the next piece may complete. */
function partialKeyLength(text: string, forms: readonly string[]): number {
  let longest = 0;
  for (const form of forms) {
    for (let n = Math.min(form.length - 1, text.length); n > longest; n--) {
      // The first character rules out almost every length before any comparison of the rest.
      if (text.charCodeAt(text.length - n) === form.charCodeAt(0) && text.endsWith(form.slice(0, n))) {
        longest = n;
        break;
      }
    }
  }
  return longest;
}

/**
 * {@link redactReply} for a reply that arrives in pieces, where the key may be split between two of them. Every
 * whole key form is replaced, scanning from the left as `split` does; of the rest, only an end that begins a key
 * form is held back until the next piece (or the end of the reply) shows whether the key follows, so ordinary
 * text streams as it comes.
 */
export function createReplyRedactor(secrets: Secrets): { push(piece: string): string; end(): string } {
  const forms = keyForms(secrets);
  let pending = '';

  const take = (last: boolean): string => {
    let out = '';
    let from = 0;
    for (;;) {
      let at = -1;
      let length = 0;
      for (const form of forms) {
        const found = pending.indexOf(form, from);
        if (found !== -1 && (at === -1 || found < at || (found === at && form.length > length))) {
          at = found;
          length = form.length;
        }
      }
      if (at === -1) break;
      out += pending.slice(from, at) + REDACTED;
      from = at + length;
    }
    const cut = last ? pending.length : pending.length - partialKeyLength(pending.slice(from), forms);
    out += pending.slice(from, cut);
    pending = pending.slice(cut);
    return out;
  };

  return {
    push(piece) {
      pending += piece.replaceAll('\u0000', '');
      return take(false);
    },
    end() {
      return take(true);
    },
  };
}

/**
 * The one excerpt of an upstream's answer: a JSON error's message when there is one, else the body; single
 * line, tag-free, at most 200 characters, and without the API key (redacted before and after shortening, so
 * a key cut in half by the limit cannot slip through either).
 */
export function upstreamExcerpt(bodyText: string, secrets?: Secrets): string {
  const redacted = redactKey(bodyText, secrets);
  return redactKey(shorten(messageOf(redacted)), secrets);
}

function messageOf(bodyText: string): string {
  const parsed = parseJson(bodyText);
  if (isRecord(parsed)) {
    const error = parsed['error'];
    if (typeof error === 'string') return error;
    if (isRecord(error) && typeof error['message'] === 'string') return error['message'];
    if (typeof parsed['message'] === 'string') return parsed['message'];
    if (typeof parsed['detail'] === 'string') return parsed['detail'];
  }
  return bodyText;
}

function shorten(text: string): string {
  const stripped = withoutMarkup(text.slice(0, 20_000))
    .replace(/&nbsp;/gi, ' ')
    .replace(/&lt;/gi, '<')
    .replace(/&gt;/gi, '>')
    .replace(/&quot;/gi, '"')
    .replace(/&#39;|&apos;/gi, "'")
    .replace(/&amp;/gi, '&')
    // Control characters and line separators would let an upstream forge log lines.
    .replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029]+/g, ' ')
    .replace(/\s+/g, ' ')
    .trim();
  const chars = Array.from(stripped);
  if (chars.length <= EXCERPT_MAX_CHARS) return stripped;
  return `${chars
    .slice(0, EXCERPT_MAX_CHARS - 1)
    .join('')
    .trimEnd()}…`;
}

/**
 * An error page's text without its scripts, styles, head, comments and tags. A regex that looks for a closing part
 * from every opening one scans to the end from each opening that has none, which made an upstream's 20 KB reply of
 * `<a` cost a third of a second. So comments and tags are stripped only up to their last closing part (past it
 * nothing can match, so the result is the same), and each block's closing tag is looked for until it is missing.
 */
export function withoutMarkup(html: string): string {
  let text = html;
  for (const name of ['script', 'style', 'head']) text = withoutBlocks(text, new RegExp(`<${name}\\b[^<>]*>`, 'gi'), new RegExp(`</${name}\\s*>`, 'gi'));
  text = upToLast(text, '-->', (head) => head.replace(/<!--[\s\S]*?-->/g, ' '));
  return upToLast(text, '>', (head) => head.replace(/<\/?[a-zA-Z!][^>]*>/g, ' '));
}

/** `edit` applied to `text` up to the end of the last `marker`; the rest, where no match can end, kept as it is. */
function upToLast(text: string, marker: string, edit: (head: string) => string): string {
  const end = text.lastIndexOf(marker);
  if (end < 0) return text;
  const cut = end + marker.length;
  return edit(text.slice(0, cut)) + text.slice(cut);
}

/** `text` with each `open` … first `close` after it replaced by a space; from an open with no close after it, kept. */
function withoutBlocks(text: string, open: RegExp, close: RegExp): string {
  const kept: string[] = [];
  let from = 0;
  open.lastIndex = 0;
  for (let opened = open.exec(text); opened !== null; opened = open.exec(text)) {
    close.lastIndex = opened.index + opened[0].length;
    const closed = close.exec(text);
    if (closed === null) break;
    kept.push(text.slice(from, opened.index), ' ');
    from = closed.index + closed[0].length;
    open.lastIndex = from;
  }
  kept.push(text.slice(from));
  return kept.join('');
}
