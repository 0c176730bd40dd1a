/**
 * Every string a client sends must be storable text. PostgreSQL refuses NUL in `text` and `jsonb`, and a lone
 * UTF-16 surrogate (which JSON's `\ud800` escape can produce) has no UTF-8 form, so either would reach the
 * database and fail there as a 500. We refuse them instead of rewriting them: silently changing what a client
 * sent (a name, a message, a secret) would be worse than telling them which field is wrong.
 */
export interface IllFormedText {
  /** Dotted path of the field, `(body)` for the input itself. */
  path: string;
  problem: string;
}

const NUL = '\u0000';
/** A high surrogate not followed by a low one, or a low one not preceded by a high one. */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
const LONE_SURROGATES = new RegExp(LONE_SURROGATE.source, 'g');
/** Inputs nest a few levels; anything deeper is refused by the schemas. This only bounds the walk. */
const MAX_DEPTH = 64;
/** Containers and strings visited at most (a 1 MiB body holds far fewer that matter). */
const MAX_NODES = 1_000_000;

function problemOf(text: string): string | null {
  if (text.includes(NUL)) return 'must not contain NUL (\\u0000) characters';
  if (LONE_SURROGATE.test(text)) return 'must not contain unpaired UTF-16 surrogates';
  return null;
}

/** A node of the walk; the path is rebuilt from parent links only when something is found. */
interface Visit {
  value: unknown;
  key: string | null;
  parent: Visit | null;
  depth: number;
}

function label(visit: Visit | null): string {
  const keys: string[] = [];
  for (let v = visit; v && v.key !== null; v = v.parent) keys.push(v.key);
  return keys.length === 0 ? '(body)' : keys.reverse().join('.');
}

/**
 * The first string (value or object key) in `input` that cannot be stored, or null. Buffers are bytes, not text.
 * Numbers, booleans and null are never queued, so a huge array of them costs no memory beyond the input itself.
 */
export function findIllFormedText(input: unknown): IllFormedText | null {
  const root: Visit = { value: input, key: null, parent: null, depth: 0 };
  const stack: Visit[] = [root];
  let queued = 1;
  while (stack.length > 0) {
    const visit = stack.pop()!;
    const { value } = visit;
    if (typeof value === 'string') {
      const problem = problemOf(value);
      if (problem) return { path: label(visit), problem };
      continue;
    }
    if (typeof value !== 'object' || value === null || value instanceof Uint8Array) continue;
    if (visit.depth >= MAX_DEPTH) return { path: label(visit), problem: 'is nested too deeply' };
    for (const key of Object.keys(value)) {
      const keyProblem = problemOf(key);
      if (keyProblem) return { path: label(visit), problem: `has a key that ${keyProblem}` };
      const child = (value as Record<string, unknown>)[key];
      if (typeof child !== 'string' && (typeof child !== 'object' || child === null)) continue;
      if (++queued > MAX_NODES) return { path: label(visit), problem: 'is too large' };
      stack.push({ value: child, key, parent: visit, depth: visit.depth + 1 });
    }
  }
  return null;
}

/**
 * JSON we did not write (an upstream's reply, a model's tool call, a tool's result), parsed, and refused as a
 * SyntaxError when it nests deeper than a request body may: JSON.parse itself copes, but everything after it that
 * stores or prints the value (toStorable, JSON.stringify) recurses, and overflowed the stack from some thousands of
 * levels, as a 500. Callers already treat a SyntaxError as "not JSON".
 */
export function parseUntrustedJson(text: string): unknown {
  const value: unknown = JSON.parse(text);
  if (nestsDeeperThan(value, MAX_DEPTH)) throw new JsonTooDeepError(`JSON nested more than ${MAX_DEPTH} levels deep`);
  return value;
}

/** Valid JSON that nests too deeply to keep: a SyntaxError, so that it goes where unparsable text goes. */
export class JsonTooDeepError extends SyntaxError {}

/** Whether arrays and objects in `value` nest more than `levels` deep (the value itself is level 1); iterative. */
function nestsDeeperThan(value: unknown, levels: number): boolean {
  const stack: Array<{ value: object; depth: number }> = [];
  if (typeof value === 'object' && value !== null) stack.push({ value, depth: 1 });
  while (stack.length > 0) {
    const visit = stack.pop()!;
    if (visit.depth > levels) return true;
    // Indexed, not copied with Object.values: an embeddings reply is thousands of number arrays, read on every batch.
    const container = visit.value as Record<string | number, unknown>;
    if (Array.isArray(container)) {
      for (let i = 0; i < container.length; i++) {
        const child: unknown = container[i];
        if (typeof child === 'object' && child !== null) stack.push({ value: child, depth: visit.depth + 1 });
      }
      continue;
    }
    for (const key of Object.keys(container)) {
      const child = container[key];
      if (typeof child === 'object' && child !== null) stack.push({ value: child, depth: visit.depth + 1 });
    }
  }
  return false;
}

/**
 * toStorable for text that arrives in pieces (an upstream's streamed reply): each piece is cleaned as it comes, and
 * the pieces joined are exactly toStorable of the whole. A high surrogate ending a piece is held back until the
 * next one shows whether its pair follows; `end()` gives what is still held (as U+FFFD: it never got its pair).
 */
export function createStreamCleaner(): { clean(piece: string): string; end(): string } {
  let held = '';
  return {
    clean(piece) {
      // NUL first, as toStorable drops it before it looks at surrogates: a NUL between a pair's halves must not split it.
      let text = (held + piece).replaceAll(NUL, '');
      held = '';
      const last = text.charCodeAt(text.length - 1);
      if (last >= 0xd800 && last <= 0xdbff) {
        held = text.slice(-1);
        text = text.slice(0, -1);
      }
      return toStorable(text);
    },
    end() {
      const rest = held === '' ? '' : '\uFFFD';
      held = '';
      return rest;
    },
  };
}

/**
 * For text we did not receive from a client but must store (an upstream's reply, a model's answer): the same two
 * things PostgreSQL refuses are rewritten instead of refused, since nobody can be asked to fix them. NUL is
 * dropped and a lone surrogate becomes U+FFFD, in strings and object keys at any depth.
 */
export function toStorable<T>(value: T): T {
  if (typeof value === 'string')
    return (value.includes(NUL) || LONE_SURROGATE.test(value) ? value.replaceAll(NUL, '').replace(LONE_SURROGATES, '\uFFFD') : value) as T;
  if (Array.isArray(value)) return value.map((item) => toStorable(item)) as T;
  if (typeof value === 'object' && value !== null && !(value instanceof Uint8Array)) {
    return Object.fromEntries(Object.entries(value).map(([key, item]) => [toStorable(key), toStorable(item)])) as T;
  }
  return value;
}

/**
 * JSON.stringify of `value` with every string and key made storable as toStorable makes them, and JSON's own rules
 * kept (a Date is written by its toJSON, an undefined property is left out), for a jsonb value we did not check.
 */
export function storableJson(value: unknown): string | undefined {
  return JSON.stringify(value, (_key, item: unknown) => {
    if (typeof item === 'string') return toStorable(item);
    if (typeof item !== 'object' || item === null || Array.isArray(item)) return item;
    const keys = Object.keys(item);
    if (!keys.some((key) => key.includes(NUL) || LONE_SURROGATE.test(key))) return item;
    return Object.fromEntries(keys.map((key) => [toStorable(key), (item as Record<string, unknown>)[key]]));
  });
}
