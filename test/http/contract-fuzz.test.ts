// Issue 10: a property-based contract fuzz of the REST surface. For every operation of the served OpenAPI
// document, bad inputs are sent with valid credentials of the kind the operation needs (owner session, API key,
// enterprise or admin session, cron secret), and every answer must keep the contract:
//   - never a 5xx and never no answer at all;
//   - an error is the envelope {success:false, error:{message, code, details}} with a code from schema/errors.ts
//     whose status (adapters/inbound/http-status.ts) is the one sent, and the status is one the document lists for the
//     operation;
//   - a 2xx only for an input the document allows (an input it forbids, such as `limit=0x10` or a 10 KB id, must
//     be refused), never for another owner's resource, which an owner must see answered exactly like an unknown
//     id (README: 404 with the same message as a missing one);
//   - a request whose body is shorter than its Content-Length gets a timely 400 or is closed by the server;
//   - the service is healthy afterwards (health 200, an authenticated request still works) and no exception
//     escaped a request handler (in production that kills the process).
// Every violation is collected and the test fails once at the end with all of them, grouped by rule and
// operation, so one run shows everything to fix. The full list is also written as JSON (path in the message).
//
// The inputs are generated with fast-check from a fixed seed (FUZZ_SEED overrides it), so a run is repeatable:
// each violation names its seed-relative case. fc.sample is used rather than fc.assert because fc.assert stops
// (and shrinks) at the first failure of a property, and this test must report every violation of a run; the
// generators change one thing at a time, so a reported input is already close to minimal.
//
// The service runs in this process (startTestApp: the migrated template database, where a child process would
// migrate from scratch for ~25 s on this machine), so a crashing request handler raises an uncaught exception
// here instead of killing a server process: those are captured and reported as "uncaught exception" violations. The
// malformed multipart cases that crashed the process when
// this test was written run last, so everything else is already recorded if one of them takes the service down.
//
// No request leaves 127.0.0.1: no chat interface used here has an external endpoint; the webhooks that validate
// and test run on are stored with a loopback URL (inserted directly, since the API refuses one); webhooks the
// fuzz creates get a public IP literal, which the address rule accepts without DNS or a connection, and delivery
// workers are off; no generated value is a resolvable http(s) URL. OUTBOUND_ALLOW_HOSTS holds only the local
// Stripe-speaking server billing calls.
import { randomBytes, randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { Ajv2020 } from 'ajv/dist/2020.js';
import formats from 'ajv-formats';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ERROR_CODES, type ErrorCode } from '../../schema/errors.ts';
import { HTTP_STATUS } from '../../adapters/inbound/http-status.ts';
import { insertWebhook } from '../../routers/webhooks/repository.ts';
import { startTestApp, type TestApp } from '../helpers/test-app.ts';
import { type FakeStripe, startFakeStripe, stripeSettings } from '../helpers/fake-stripe.ts';
import { sendRaw, sendTruncated, type RawOutcome, type RawResponse } from '../helpers/raw-https.ts';

// ajv-formats is CommonJS: under NodeNext its default import is the module object, whose `default` is the plugin.
const addFormats = formats.default;
const SEED = Number(process.env.FUZZ_SEED ?? 0x10_f022);
const REQUEST_TIMEOUT_MS = 15_000;
/** A truncated request must be answered or closed by the server within this. */
const TRUNCATED_TIMEOUT_MS = 4_000;
const HUGE_STRING_CHARS = 100 * 1024;
const PASSWORD = 'correct horse battery';
const CRON_SECRET = `cron-${randomBytes(16).toString('hex')}`;
/** A public address the service accepts for a webhook but never contacts here (delivery workers are off). */
const NEVER_CONTACTED_RECEIVER = 'https://93.184.215.14/fuzz-never-delivered';
/** Never reachable from the service: the address rule refuses loopback before any connection is made. */
const LOOPBACK_RECEIVER = 'https://127.0.0.1:9/fuzz-receiver';
// A 1x1 PNG: a valid avatar, so a valid upload can succeed.
const TINY_PNG = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==', 'base64');
const METHODS = ['get', 'post', 'put', 'patch', 'delete'] as const;

// ---------------------------------------------------------------------------------------------------------
// The operations, read from the served document
// ---------------------------------------------------------------------------------------------------------

type JsonSchema = Record<string, any>;

interface Param {
  name: string;
  required: boolean;
  schema: JsonSchema;
}

interface Operation {
  method: string;
  path: string;
  name: string;
  /** x-auth of the document: P, S, K, "S or K", E, A, I. */
  auth: string;
  documented: Set<number>;
  pathParams: Param[];
  queryParams: Param[];
  body?: { mediaType: 'json' | 'multipart'; schema: JsonSchema };
}

function readOperations(doc: any): Operation[] {
  const operations: Operation[] = [];
  for (const [path, item] of Object.entries(doc.paths as Record<string, any>)) {
    for (const method of METHODS) {
      const op = item[method];
      if (!op) continue;
      const params = [...(item.parameters ?? []), ...(op.parameters ?? [])] as Array<{ in: string; name: string; required?: boolean; schema?: JsonSchema }>;
      const toParam = (p: { name: string; required?: boolean; schema?: JsonSchema }): Param => ({
        name: p.name,
        required: !!p.required,
        schema: p.schema ?? {},
      });
      const content = op.requestBody?.content ?? {};
      const body = content['application/json']
        ? { mediaType: 'json' as const, schema: content['application/json'].schema ?? {} }
        : content['multipart/form-data']
          ? { mediaType: 'multipart' as const, schema: content['multipart/form-data'].schema ?? {} }
          : undefined;
      operations.push({
        method: method.toUpperCase(),
        path,
        name: `${method.toUpperCase()} ${path}`,
        auth: String(op['x-auth'] ?? 'P'),
        documented: new Set(Object.keys(op.responses ?? {}).map(Number)),
        pathParams: params.filter((p) => p.in === 'path').map(toParam),
        queryParams: params.filter((p) => p.in === 'query').map(toParam),
        body,
      });
    }
  }
  return operations;
}

// ---------------------------------------------------------------------------------------------------------
// What the document allows (the oracle for "this input must be refused")
// ---------------------------------------------------------------------------------------------------------

function createValidators(doc: any) {
  const ajv = new Ajv2020({ strict: false, allErrors: false, logger: false });
  addFormats(ajv);
  ajv.addFormat('binary', true);
  const cache = new Map<string, (value: unknown) => boolean>();
  const compile = (schema: JsonSchema) => {
    const key = JSON.stringify(schema);
    let validate = cache.get(key);
    if (!validate) {
      // Body schemas $ref '#/components/schemas/...': the components travel with each compiled schema.
      const compiled = ajv.compile({ ...schema, components: doc.components });
      validate = (value: unknown) => compiled(value) as boolean;
      cache.set(key, validate);
    }
    return validate;
  };
  return {
    /** The body as the server will see it (UTF-8 decoded, JSON parsed) against the documented schema. */
    jsonBodyValid(op: Operation, bytes: Buffer): boolean {
      let value: unknown;
      try {
        value = JSON.parse(bytes.toString('utf8'));
      } catch {
        return false;
      }
      return compile(op.body?.schema ?? {})(value);
    },
    /** A query or path value (already decoded) against its parameter schema. Integers must be plain decimals. */
    paramValid(param: Param, value: string): boolean {
      const schema = param.schema;
      const type = schema.type;
      if (type === 'integer' || type === 'number') {
        const pattern = type === 'integer' ? /^-?\d+$/ : /^-?\d+(\.\d+)?$/;
        if (!pattern.test(value)) return false;
        return compile(schema)(Number(value));
      }
      return compile(schema)(value);
    },
  };
}

/** Decodes a query value the way URLSearchParams does (lenient: bad escapes stay, bad UTF-8 becomes U+FFFD). */
function decodeQueryValue(raw: string): string {
  return new URLSearchParams(`v=${raw}`).get('v') ?? '';
}

function decodePathSegment(raw: string): string | undefined {
  try {
    return decodeURIComponent(raw);
  } catch {
    return undefined;
  }
}

// ---------------------------------------------------------------------------------------------------------
// Generated values
// ---------------------------------------------------------------------------------------------------------

/** JSON text inserted verbatim (numbers JSON.stringify cannot write, nesting it would overflow on). */
class RawJson {
  constructor(
    readonly text: string,
    readonly label: string,
  ) {}
}

/** A JSON string whose content is these bytes, verbatim (invalid UTF-8). */
class RawBytes {
  constructor(
    readonly bytes: Buffer,
    readonly label: string,
  ) {}
}

const MARKER = /"\\u0000FUZZRAW(\d+)\\u0000"/g;

/** JSON.stringify, except RawJson and RawBytes values are written as their raw bytes. */
function serialize(value: unknown): Buffer {
  const raws: Buffer[] = [];
  const text = JSON.stringify(value, (_key, v) => {
    if (v instanceof RawJson) raws.push(Buffer.from(v.text, 'utf8'));
    else if (v instanceof RawBytes) raws.push(Buffer.concat([Buffer.from('"'), v.bytes, Buffer.from('"')]));
    else return v;
    return `\u0000FUZZRAW${raws.length - 1}\u0000`;
  });
  const out: Buffer[] = [];
  let last = 0;
  for (const match of text.matchAll(MARKER)) {
    out.push(Buffer.from(text.slice(last, match.index), 'utf8'), raws[Number(match[1])]!);
    last = match.index! + match[0].length;
  }
  out.push(Buffer.from(text.slice(last), 'utf8'));
  return Buffer.concat(out);
}

/** A short, readable rendering of a generated value for violation reports. */
function show(value: unknown): string {
  const text = JSON.stringify(value, (_key, v) => {
    if (v instanceof RawJson || v instanceof RawBytes) return `<${v.label}>`;
    if (typeof v === 'string' && v.length > 48) return `${v.slice(0, 24)}…(${v.length} chars)`;
    if (typeof v === 'number' && !Number.isFinite(v)) return `<${v}>`;
    if (Object.is(v, -0)) return '<-0>';
    return v;
  });
  return text === undefined ? String(value) : text;
}

const wrongTypes = fc.constantFrom<unknown>(0, 1, -1, 3.5, true, false, null, {}, [], ['x'], [1, null], { nested: { deeper: [null] } }, '', 'x');
const hugeNumbers = fc.constantFrom<unknown>(1e308, -1e308, -0, 2 ** 64, 2 ** 53 + 2, -(2 ** 63), 5e-324, Number.MAX_SAFE_INTEGER);
const numericStrings = fc.constantFrom<unknown>(
  'NaN',
  'Infinity',
  '-Infinity',
  '-0',
  '1e308',
  '1e309',
  '18446744073709551616',
  '0x10',
  ' 5',
  '5 ',
  '1_000',
  '1e3',
);
const oddStrings = fc.constantFrom<unknown>(
  '\u0000',
  'a\u0000b',
  '\ud800',
  'x\udfffy',
  '\udc00\ud800',
  '\ud83d',
  'lone \ud800 in text',
  '\uffff\ufffe',
  '\u202eevil',
  '\u0085\u2028\u2029',
  '\r\n\r\nX-Injected: 1',
  '../../../etc/passwd',
  "' OR '1'='1' --",
  '<script>alert(1)</script>',
  '%00',
  '__proto__',
  ' ',
  '\t\n',
  'e\u0301\u0301\u0301',
  '😀'.repeat(60),
);
const hugeStrings = fc.constantFrom<unknown>(
  'a'.repeat(HUGE_STRING_CHARS),
  '\u0000'.repeat(10 * 1024),
  '😀'.repeat(HUGE_STRING_CHARS / 4),
  '\ud800'.repeat(10 * 1024),
);
const rawValues = fc.constantFrom<unknown>(
  new RawJson('123456789012345678901234567890123456789', 'a 39-digit integer'),
  new RawJson('1e400', '1e400 (Infinity once parsed)'),
  new RawJson('-1e400', '-1e400'),
  new RawJson('-0', '-0 literal'),
  new RawJson('1E+2', '1E+2'),
  new RawJson('0.1e-400', 'an underflowing number'),
  new RawJson(`${'['.repeat(5000)}${']'.repeat(5000)}`, '5000 nested arrays'),
  new RawJson(`${'{"a":'.repeat(3000)}1${'}'.repeat(3000)}`, '3000 nested objects'),
  new RawBytes(Buffer.from([0xff, 0xfe]), 'invalid UTF-8 bytes ff fe'),
  new RawBytes(Buffer.from([0xed, 0xa0, 0x80]), 'UTF-8 encoded lone surrogate ed a0 80'),
  new RawBytes(Buffer.from([0xc0, 0xaf]), 'overlong UTF-8 c0 af'),
  new RawBytes(Buffer.from([0x61, 0xf0, 0x9f, 0x98]), 'UTF-8 cut inside a character'),
);
const badValue: fc.Arbitrary<unknown> = fc.oneof(
  { arbitrary: wrongTypes, weight: 4 },
  { arbitrary: hugeNumbers, weight: 2 },
  { arbitrary: numericStrings, weight: 2 },
  { arbitrary: oddStrings, weight: 4 },
  { arbitrary: hugeStrings, weight: 1 },
  { arbitrary: rawValues, weight: 2 },
  { arbitrary: fc.oneof(fc.integer(), fc.double()), weight: 1 },
  { arbitrary: fc.jsonValue({ maxDepth: 2 }), weight: 1 },
);
const extraFieldName = fc.constantFrom(
  'extra',
  '__proto__',
  'constructor',
  'prototype',
  '',
  '\u0000',
  '\ud800',
  'id',
  'ownerId',
  'owner_id',
  'plan',
  'role',
  'success',
  'a'.repeat(1000),
);
/** Sent to every field of every JSON body: odd strings, one value of each JSON type, huge strings and numbers. */
const PER_FIELD_VALUES: unknown[] = [
  '\u0000',
  'a\u0000b',
  '\ud800',
  'x\udfffy',
  12345,
  null,
  true,
  { a: 1 },
  ['x'],
  'a'.repeat(HUGE_STRING_CHARS),
  1e308,
  2 ** 64,
  new RawJson('-0', '-0 literal'),
  'NaN',
];
const badTopLevel = fc.constantFrom<unknown>(
  null,
  [],
  [{}],
  'a string',
  0,
  true,
  new RawJson(`${'['.repeat(100_000)}${']'.repeat(100_000)}`, '100000 nested arrays'),
);

/** Query values, percent-encoded as sent. The label says what they decode to. */
const BAD_QUERY_VALUES: Array<[string, string]> = [
  ['0x10', '0x10'],
  ['1e3', '1e3'],
  ['" 5" (leading space)', '%205'],
  ['"5 " (trailing space)', '5%20'],
  ['"+5" as a space', '+5'],
  ['-1', '-1'],
  ['0', '0'],
  ['1.5', '1.5'],
  ['NaN', 'NaN'],
  ['Infinity', 'Infinity'],
  ['400-digit number', '9'.repeat(400)],
  ['2^64', '18446744073709551616'],
  ['NUL', '%00'],
  ['5 then NUL', '5%00'],
  ['encoded lone surrogate (invalid UTF-8)', '%ED%A0%80'],
  ['invalid UTF-8 byte', '%FF'],
  ['invalid percent-encoding', '%ZZ'],
  ['10 KB value', 'a'.repeat(10 * 1024)],
  ['true', 'true'],
  ['SQL', "1'%20OR%20'1'%3D'1"],
];

/** Path segments, sent verbatim (the path is not normalised). None names a resource of the caller. */
const BAD_PATH_SEGMENTS: Array<[string, string]> = [
  ['NUL', '%00'],
  ['NUL inside', 'abc%00def'],
  ['..%2F traversal', '..%2F..%2Fhealth%2Fhosting'],
  ['encoded dot-dot', '%2e%2e'],
  ['10 KB id', 'a'.repeat(10 * 1024)],
  ['101 chars', 'b'.repeat(101)],
  ['not a UUID', 'not-a-uuid'],
  ['nil UUID', '00000000-0000-0000-0000-000000000000'],
  ['unknown UUID', 'f4f0c5a2-9b1e-4c1d-8e0f-6a2b3c4d5e6f'],
  ['invalid percent-encoding', '%ZZ'],
  ['encoded lone surrogate (invalid UTF-8)', '%ED%A0%80'],
  ['invalid UTF-8 bytes', '%FF%FE'],
  ['overlong slash', '%C0%AF'],
  ['encoded slash', 'a%2Fb'],
  ['double-encoded NUL', '%2500'],
  ['CRLF', '%0D%0A'],
  ['-1', '-1'],
  ['0x10', '0x10'],
  ['SQL', "'%20OR%20'1'%3D'1"],
  ['emoji', '%F0%9F%98%80'],
];

/** Operations whose contract is a 500: the spec's error-tracking example raises on purpose (its envelope is still checked). */
const DELIBERATE_500 = new Set(['GET /api/v1/error-tracking-example-api']);

/** Path parameters that are free text rather than resource ids (a 2xx is then allowed for a valid value). */
const FREE_TEXT_PATH_PARAMS = new Set(['locale']);

// ---------------------------------------------------------------------------------------------------------
// Cases
// ---------------------------------------------------------------------------------------------------------

interface FuzzCase {
  summary: string;
  /** Raw (already encoded) path segments replacing the base ones. */
  path?: Record<string, string>;
  /** Raw query string replacing the base one. */
  query?: string;
  /** Body bytes and their content type (null: no Content-Type header). Absent: the base body. */
  body?: { bytes: Buffer; contentType: string | null };
  /** Declared Content-Length beyond the bytes sent: the request is truncated. */
  truncatedTo?: number;
  /** The document forbids this input: a 2xx is a violation. */
  mustReject: boolean;
  /** Names another owner's resource (this id): it must be answered exactly as the twin, the same request with an unknown id. */
  foreign?: { id: string; twin: FuzzCase; unknownId: string };
}

interface Base {
  path: Record<string, string>;
  query: Record<string, string>;
  json?: () => unknown;
  multipart?: () => Multipart;
  /** Another owner's ids, by path param, query param or body field. */
  foreign?: { path?: Record<string, string>; query?: Record<string, string>; body?: Record<string, string> };
}

interface Part {
  name: string;
  /** A file part when set (bytes allowed, for invalid UTF-8 file names). */
  filename?: string | Buffer;
  contentType?: string;
  value: string | Buffer;
}

interface Multipart {
  parts: Part[];
}

function multipartBytes(parts: Part[], options: { closing?: boolean; boundary?: string } = {}): { bytes: Buffer; contentType: string } {
  const boundary = options.boundary ?? `----fuzz${randomBytes(8).toString('hex')}`;
  const chunks: Buffer[] = [];
  for (const part of parts) {
    const disposition = [Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${part.name}"`)];
    if (part.filename !== undefined) disposition.push(Buffer.from('; filename="'), Buffer.from(part.filename), Buffer.from('"'));
    chunks.push(
      ...disposition,
      Buffer.from(part.contentType ? `\r\nContent-Type: ${part.contentType}` : ''),
      Buffer.from('\r\n\r\n'),
      Buffer.from(part.value),
      Buffer.from('\r\n'),
    );
  }
  if (options.closing !== false) chunks.push(Buffer.from(`--${boundary}--\r\n`));
  return { bytes: Buffer.concat(chunks), contentType: `multipart/form-data; boundary=${boundary}` };
}

function queryString(values: Record<string, string>): string {
  return Object.entries(values)
    .map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`)
    .join('&');
}

/** All paths into a value (object keys and array indexes), the root excluded. */
function pathsInto(value: unknown, prefix: Array<string | number> = []): Array<Array<string | number>> {
  if (Array.isArray(value)) return value.flatMap((item, i) => [[...prefix, i], ...pathsInto(item, [...prefix, i])]);
  if (value && typeof value === 'object') return Object.entries(value).flatMap(([k, v]) => [[...prefix, k], ...pathsInto(v, [...prefix, k])]);
  return [];
}

/** A deep copy that keeps RawJson and RawBytes instances (structuredClone would turn them into plain objects). */
function clone(value: unknown): unknown {
  if (value instanceof RawJson || value instanceof RawBytes) return value;
  if (Array.isArray(value)) return value.map(clone);
  if (value && typeof value === 'object') {
    const copy = {};
    for (const [k, v] of Object.entries(value)) Object.defineProperty(copy, k, { value: clone(v), enumerable: true, writable: true, configurable: true });
    return copy;
  }
  return value;
}

function setAt(root: unknown, path: Array<string | number>, value: unknown): unknown {
  const copy = clone(root) as any;
  let target = copy;
  for (const key of path.slice(0, -1)) {
    target = target?.[key];
    if (!target || typeof target !== 'object') return copy; // an earlier mutation replaced the parent
  }
  // defineProperty, so that "__proto__" becomes an own key that JSON.stringify writes.
  Object.defineProperty(target, path[path.length - 1]!, { value, enumerable: true, writable: true, configurable: true });
  return copy;
}

function seedFor(name: string): number {
  let hash = SEED >>> 0;
  for (const ch of name) hash = Math.imul(hash ^ ch.charCodeAt(0), 16777619) >>> 0;
  return hash | 0;
}

function buildCases(op: Operation, base: Base, validators: ReturnType<typeof createValidators>): FuzzCase[] {
  const cases: FuzzCase[] = [];
  const unknownId = randomUUID();
  const jsonCase = (summary: string, value: unknown, extra: Partial<FuzzCase> = {}): FuzzCase => {
    const bytes = serialize(value);
    return { summary, body: { bytes, contentType: 'application/json' }, mustReject: !validators.jsonBodyValid(op, bytes), ...extra };
  };
  const rawJsonCase = (summary: string, text: string | Buffer, contentType: string | null, mustReject: boolean): FuzzCase => ({
    summary,
    body: { bytes: Buffer.from(text), contentType },
    mustReject,
  });

  // Path parameters: bad ids, and another owner's real id.
  for (const param of op.pathParams) {
    for (const [label, raw] of BAD_PATH_SEGMENTS) {
      const decoded = decodePathSegment(raw);
      const mustReject = !FREE_TEXT_PATH_PARAMS.has(param.name) || decoded === undefined || !validators.paramValid(param, decoded);
      cases.push({ summary: `path ${param.name} = ${label} (${raw.length > 60 ? `${raw.slice(0, 30)}…` : raw})`, path: { [param.name]: raw }, mustReject });
    }
    const foreign = base.foreign?.path?.[param.name];
    if (foreign) {
      const twin: FuzzCase = { summary: `path ${param.name} = an unknown id`, path: { [param.name]: unknownId }, mustReject: true };
      cases.push({
        summary: `path ${param.name} = another owner's ${param.name} (${foreign})`,
        path: { [param.name]: encodeURIComponent(foreign) },
        mustReject: true,
        foreign: { id: foreign, twin, unknownId },
      });
    }
  }

  // Query parameters: odd numbers and strings, repeated and missing parameters, another owner's id.
  for (const param of op.queryParams) {
    for (const [label, raw] of BAD_QUERY_VALUES) {
      const others = { ...base.query };
      delete others[param.name];
      const query = [queryString(others), `${encodeURIComponent(param.name)}=${raw}`].filter(Boolean).join('&');
      cases.push({ summary: `query ${param.name} = ${label}`, query, mustReject: !validators.paramValid(param, decodeQueryValue(raw)) });
    }
    const valid = base.query[param.name] ?? '1';
    cases.push({
      summary: `query ${param.name} given twice`,
      query: [queryString(base.query), `${encodeURIComponent(param.name)}=${encodeURIComponent(valid)}`].join('&'),
      mustReject: false,
    });
    cases.push({
      summary: `query ${param.name}[]= (array syntax)`,
      query: [queryString(base.query), `${encodeURIComponent(param.name)}[]=${encodeURIComponent(valid)}`].join('&'),
      mustReject: false,
    });
    if (param.required) {
      const others = { ...base.query };
      delete others[param.name];
      cases.push({ summary: `query ${param.name} missing (required)`, query: queryString(others), mustReject: true });
    }
    const foreign = base.foreign?.query?.[param.name];
    if (foreign) {
      const twin: FuzzCase = {
        summary: `query ${param.name} = an unknown id`,
        query: queryString({ ...base.query, [param.name]: unknownId }),
        mustReject: true,
      };
      cases.push({
        summary: `query ${param.name} = another owner's (${foreign})`,
        query: queryString({ ...base.query, [param.name]: foreign }),
        mustReject: true,
        foreign: { id: foreign, twin, unknownId },
      });
    }
  }
  cases.push({
    summary: 'unknown query parameters',
    query: [queryString(base.query), 'unknown=1&__proto__=x&constructor[prototype]=1'].filter(Boolean).join('&'),
    mustReject: false,
  });

  if (op.body?.mediaType === 'json' && base.json) {
    const valid = base.json() as Record<string, unknown>;
    const properties = (op.body.schema.properties ?? {}) as Record<string, JsonSchema>;
    const required = (op.body.schema.required ?? []) as string[];
    const validText = serialize(valid).toString('utf8');
    for (const field of required) {
      const { [field]: _dropped, ...rest } = base.json() as Record<string, unknown>;
      cases.push(jsonCase(`body without required ${field}`, rest));
    }
    // Every documented field (and every value inside the valid body) gets the values that broke routes before:
    // NUL and lone surrogates (PostgreSQL refuses both in text and json), and each wrong JSON type.
    const fieldTargets = [
      ...pathsInto(valid),
      ...Object.keys(properties)
        .filter((p) => !(p in valid))
        .map((p) => [p]),
    ];
    for (const target of fieldTargets) {
      for (const value of PER_FIELD_VALUES) cases.push(jsonCase(`body.${target.join('.')} = ${show(value)}`, setAt(base.json(), target, value)));
    }
    for (const [field, value] of Object.entries(base.foreign?.body ?? {})) {
      const twin = jsonCase(`body.${field} = an unknown id`, { ...valid, [field]: unknownId }, { mustReject: true });
      cases.push(
        jsonCase(`body.${field} = another owner's (${value})`, { ...valid, [field]: value }, { foreign: { id: value, twin, unknownId }, mustReject: true }),
      );
    }
    // Content types: only application/json is documented for these operations.
    cases.push(rawJsonCase('text/plain with a JSON body', validText, 'text/plain', true));
    cases.push(rawJsonCase('no Content-Type with a JSON body', validText, null, true));
    cases.push(rawJsonCase('form-urlencoded body', 'name=x&message=y', 'application/x-www-form-urlencoded', true));
    const asMultipart = multipartBytes(
      Object.entries(valid).map(([name, value]) => ({ name, value: typeof value === 'string' ? value : JSON.stringify(value) })),
    );
    cases.push({
      summary: 'multipart/form-data on a JSON operation',
      body: { bytes: asMultipart.bytes, contentType: asMultipart.contentType },
      mustReject: true,
    });
    // Bodies that may be accepted get a fresh base (sign-up: a new email each time, so no 409 for a reused one).
    const fresh = () => serialize(base.json!()).toString('utf8');
    cases.push(
      rawJsonCase('application/json; charset=utf-8', fresh(), 'application/json; charset=utf-8', !validators.jsonBodyValid(op, Buffer.from(validText))),
    );
    // Malformed and odd JSON text.
    cases.push(rawJsonCase('truncated JSON text', validText.slice(0, Math.max(1, validText.length - 3)), 'application/json', true));
    cases.push(rawJsonCase('trailing garbage after JSON', `${validText}x`, 'application/json', true));
    // The valid body may be {}: then these cases bring their own string.
    const withString = validText.includes('"') ? validText : '{"a":"b"}';
    cases.push(rawJsonCase('raw NUL byte inside a JSON string', withString.replace(/"([^"]*)"/, '"$1\u0000"'), 'application/json', true));
    // RFC 8259 lets a parser ignore a BOM: either answer is fine, a 5xx is not.
    cases.push(rawJsonCase('UTF-8 BOM before JSON', `\ufeff${fresh()}`, 'application/json', false));
    cases.push(rawJsonCase('single quotes instead of double quotes', withString.replaceAll('"', "'"), 'application/json', true));
    cases.push(rawJsonCase('JSON body is only whitespace', '   ', 'application/json', true));
    for (const field of Object.keys(properties)
      .filter((f) => typeof valid[f] === 'string' || properties[f]?.type === 'string')
      .slice(0, 4)) {
      for (const bytes of [Buffer.from([0xff, 0xfe, 0x41]), Buffer.from([0xed, 0xa0, 0x80])]) {
        cases.push(
          jsonCase(
            `body.${field} = raw bytes ${bytes.toString('hex')} (invalid UTF-8)`,
            setAt(base.json(), [field], new RawBytes(bytes, `bytes ${bytes.toString('hex')}`)),
          ),
        );
      }
    }
    const oversized = serialize({ ...valid, padding: 'p'.repeat(2 * 1024 * 1024) });
    cases.push({
      summary: 'a 2 MB JSON body (over the documented 1 MiB body limit of the README)',
      body: { bytes: oversized, contentType: 'application/json' },
      mustReject: true,
    });
    // A body shorter than its Content-Length, then the end of the request.
    cases.push({
      summary: 'Content-Length 64 bytes more than sent, then end of request',
      body: { bytes: Buffer.from(validText), contentType: 'application/json' },
      truncatedTo: Buffer.byteLength(validText) + 64,
      mustReject: true,
    });
  }

  if (op.body?.mediaType === 'multipart' && base.multipart) {
    const valid = base.multipart().parts;
    const fieldParts = valid.filter((p) => p.filename === undefined);
    const filePart = valid.find((p) => p.filename !== undefined)!;
    const mp = (summary: string, parts: Part[], mustReject: boolean): FuzzCase => {
      const { bytes, contentType } = multipartBytes(parts);
      return { summary, body: { bytes, contentType }, mustReject };
    };
    cases.push(
      rawJsonCase(
        'JSON body on a multipart operation',
        JSON.stringify(Object.fromEntries(fieldParts.map((p) => [p.name, String(p.value)]))),
        'application/json',
        true,
      ),
    );
    cases.push(rawJsonCase('text/plain body on a multipart operation', 'just text', 'text/plain', true));
    cases.push({
      summary: 'multipart/form-data without a boundary parameter',
      body: { bytes: multipartBytes(valid).bytes, contentType: 'multipart/form-data' },
      mustReject: true,
    });
    cases.push({
      summary: 'multipart boundary that does not match the body',
      body: { bytes: multipartBytes(valid).bytes, contentType: 'multipart/form-data; boundary=nope' },
      mustReject: true,
    });
    cases.push(mp('multipart without the file part', fieldParts, true));
    cases.push(mp('file sent under another field name', [...fieldParts, { ...filePart, name: 'upload' }], true));
    cases.push(mp('file part without a filename', [...fieldParts, { name: filePart.name, value: filePart.value }], false));
    cases.push(mp('two file parts', [...fieldParts, filePart, { ...filePart, filename: 'second.txt' }], false));
    cases.push(mp('empty file', [...fieldParts, { ...filePart, value: Buffer.alloc(0) }], false));
    for (const [label, filename] of [
      ['NUL in file name', 'a\u0000b.txt'],
      ['traversal file name', '../../../etc/passwd'],
      ['10 KB file name', `${'n'.repeat(10 * 1024)}.txt`],
      ['invalid UTF-8 file name', Buffer.from([0xff, 0xfe, 0x2e, 0x74, 0x78, 0x74])],
      ['encoded lone surrogate file name', Buffer.from([0xed, 0xa0, 0x80, 0x2e, 0x74, 0x78, 0x74])],
      ['file name with a quote and CRLF', 'a"\r\nX: y.txt'],
    ] as Array<[string, string | Buffer]>) {
      cases.push(mp(label, [...fieldParts, { ...filePart, filename }], false));
    }
    cases.push(mp('file content is not what the name says', [...fieldParts, { ...filePart, value: randomBytes(512) }], false));
    for (const part of fieldParts) {
      const others = fieldParts.filter((p) => p !== part);
      const field = op.body.schema.properties?.[part.name] ?? {};
      // An id field names a resource; none of these values names one of the caller's.
      const mustRejectValue = (value: string) => /id$/i.test(part.name) || !validators.paramValid({ name: part.name, required: true, schema: field }, value);
      cases.push(mp(`multipart without field ${part.name}`, [...others, filePart], (op.body.schema.required ?? []).includes(part.name)));
      for (const [label, value] of [
        ['NUL', '\u0000'],
        ['100 KB', 'a'.repeat(HUGE_STRING_CHARS)],
        ['not a UUID', 'not-a-uuid'],
        ['empty', ''],
      ] as Array<[string, string]>) {
        cases.push(mp(`multipart field ${part.name} = ${label}`, [...others, { name: part.name, value }, filePart], mustRejectValue(value)));
      }
      cases.push(mp(`multipart field ${part.name} = invalid UTF-8 bytes`, [...others, { name: part.name, value: Buffer.from([0xff, 0xfe]) }, filePart], true));
      const foreign = base.foreign?.body?.[part.name];
      if (foreign) {
        const twin = mp(`multipart field ${part.name} = an unknown id`, [...others, { name: part.name, value: unknownId }, filePart], true);
        cases.push({
          ...mp(`multipart field ${part.name} = another owner's (${foreign})`, [...others, { name: part.name, value: foreign }, filePart], true),
          foreign: { id: foreign, twin, unknownId },
        });
      }
    }
  }

  if (!op.body) {
    // A body where the document expects none: it must be ignored or refused, never a crash.
    cases.push(rawJsonCase('unexpected JSON body', '{"unexpected":true}', 'application/json', false));
    cases.push(rawJsonCase('unexpected malformed body', '{"unexpected":', 'application/json', false));
  }

  // Random cases: one or a few mutations of the valid base input.
  const random: Array<fc.Arbitrary<FuzzCase>> = [];
  let runs = 4;
  const json = base.json;
  if (op.body?.mediaType === 'json' && json) {
    const valid = json() as Record<string, unknown>;
    const properties = Object.keys(op.body.schema.properties ?? {});
    const targets = [...pathsInto(valid), ...properties.filter((p) => !(p in valid)).map((p) => [p])];
    if (targets.length) {
      const mutation = fc.record({ target: fc.constantFrom(...targets), value: badValue });
      random.push(mutation.map(({ target, value }) => jsonCase(`body.${target.join('.')} = ${show(value)}`, setAt(json(), target, value))));
      // Several fields at once: one mutation per top-level field, so none lands inside another's replacement.
      if (new Set(targets.map((t) => t[0])).size >= 2)
        random.push(
          fc.uniqueArray(mutation, { minLength: 2, maxLength: 4, selector: (m) => m.target[0] }).map((ms) => {
            let body = json();
            for (const m of ms) body = setAt(body, m.target, m.value);
            return jsonCase(ms.map((m) => `body.${m.target.join('.')} = ${show(m.value)}`).join(', '), body);
          }),
        );
    }
    random.push(
      fc.uniqueArray(fc.tuple(extraFieldName, badValue), { minLength: 1, maxLength: 3, selector: ([name]) => name }).map((extras) => {
        let body = json();
        for (const [name, value] of extras) body = setAt(body, [name], value);
        return jsonCase(`extra fields ${extras.map(([n, v]) => `${show(n)}: ${show(v)}`).join(', ')}`, body);
      }),
    );
    random.push(badTopLevel.map((value) => jsonCase(`body = ${show(value)}`, value)));
    runs = Math.min(40, 12 + 3 * targets.length);
  }
  if (op.queryParams.length) {
    const queryValue = fc.oneof(
      fc.constantFrom(...BAD_QUERY_VALUES),
      fc.oneof(fc.integer(), fc.double()).map((n): [string, string] => [String(n), encodeURIComponent(String(n))]),
      oddStrings.map((s): [string, string] => [show(s), encodeURIComponent(String(s).replace(/[\ud800-\udfff]/g, '\ufffd'))]),
    );
    random.push(
      fc
        .uniqueArray(fc.tuple(fc.constantFrom(...op.queryParams), queryValue), { minLength: 1, maxLength: op.queryParams.length, selector: ([p]) => p.name })
        .map((pairs) => {
          const values = { ...base.query };
          for (const [p] of pairs) delete values[p.name];
          const query = [queryString(values), ...pairs.map(([p, [, raw]]) => `${encodeURIComponent(p.name)}=${raw}`)].filter(Boolean).join('&');
          const mustReject = pairs.some(([p, [, raw]]) => !validators.paramValid(p, decodeQueryValue(raw)));
          return { summary: `query ${pairs.map(([p, [label]]) => `${p.name} = ${label}`).join(', ')}`, query, mustReject };
        }),
    );
    runs = Math.max(runs, 12 + 6 * op.queryParams.length);
  }
  if (random.length) cases.push(...fc.sample(fc.oneof(...random), { seed: seedFor(op.name), numRuns: runs }));
  return cases;
}

// ---------------------------------------------------------------------------------------------------------
// The contract check of one answer
// ---------------------------------------------------------------------------------------------------------

interface Violation {
  rule: string;
  operation: string;
  input: string;
  status: number | string;
  body: string;
  detail?: string;
}

function excerpt(text: string, max = 300): string {
  const flat = text.replace(/\s+/g, ' ');
  return flat.length > max ? `${flat.slice(0, max)}…` : flat;
}

function envelopeProblem(body: unknown): string | undefined {
  const b = body as any;
  if (!b || typeof b !== 'object') return 'not JSON';
  if (b.success !== false) return 'success is not false';
  if (!b.error || typeof b.error !== 'object') return 'no error object';
  if (typeof b.error.message !== 'string') return 'error.message is not a string';
  if (typeof b.error.details !== 'string') return 'error.details is not a string';
  if (!(ERROR_CODES as readonly string[]).includes(b.error.code)) return `error.code ${JSON.stringify(b.error.code)} is not in the closed list`;
  return undefined;
}

function checkResponse(op: Operation, c: FuzzCase, res: RawResponse): Array<Omit<Violation, 'operation' | 'input'>> {
  const found: Array<Omit<Violation, 'operation' | 'input'>> = [];
  const add = (rule: string, detail?: string) => found.push({ rule, status: res.status, body: excerpt(res.text), detail });
  const { status } = res;
  if (status >= 500 && !(DELIBERATE_500.has(op.name) && status === 500)) add('5xx answer');
  else if (status === 429) add('429 rate limited (raise the fuzz rate limits: it masks the result)');
  else if (!op.documented.has(status)) add(`status ${status} not documented for the operation`, `documented: ${[...op.documented].join(', ')}`);
  if (status >= 200 && status < 300) {
    if (c.foreign) add("2xx for another owner's resource");
    else if (c.mustReject) add('2xx for an input the document forbids');
    return found;
  }
  const problem = envelopeProblem(res.body);
  if (problem) add('not the error envelope', problem);
  else {
    const code = (res.body as any).error.code as ErrorCode;
    if (HTTP_STATUS[code] !== status) add('error code does not match the status', `${code} is ${HTTP_STATUS[code]}, sent ${status}`);
  }
  return found;
}

// ---------------------------------------------------------------------------------------------------------
// The run
// ---------------------------------------------------------------------------------------------------------

interface Owner {
  token: string;
  id: string;
  email: string;
}

interface Fixtures {
  a: Owner;
  b: Owner;
  c: Owner;
  d: Owner;
  apiKeyA: string;
  configA: string;
  configB: string;
  victimConfigA: string;
  chatA: { id: string; slug: string };
  chatB: { id: string; slug: string };
  victimChatA: string;
  victimKeyA: string;
  keyB: string;
  hookA: string;
  hookB: string;
  documentB: string;
  sessionA: string;
}

let app: TestApp;
let fx: Fixtures;
let operations: Operation[];
let validators: ReturnType<typeof createValidators>;
const violations: Violation[] = [];
const uncaught: Array<{ error: unknown; during: string }> = [];
let currentlyRunning = 'set-up';
let requestCount = 0;
/** Answers by status class, for the summary line (a fuzz that only ever sees 400 reaches no handler). */
const statusCounts: Record<string, number> = {};
const onUncaught = (error: unknown) => uncaught.push({ error, during: currentlyRunning });

function unwrap(res: RawOutcome, what: string, status: number): any {
  if (res.response?.status !== status)
    throw new Error(`fixture ${what}: expected ${status}, got ${res.response?.status ?? res.failure} ${res.response?.text.slice(0, 300) ?? ''}`);
  return res.response.body;
}

async function call(method: string, path: string, token?: string, body?: unknown): Promise<RawOutcome> {
  const headers: Record<string, string> = {};
  if (token) headers.authorization = `Bearer ${token}`;
  let bytes: Buffer | undefined;
  if (body !== undefined) {
    bytes = Buffer.from(JSON.stringify(body));
    headers['content-type'] = 'application/json';
  }
  return sendRaw(app.url, { method, path, headers, body: bytes, timeoutMs: REQUEST_TIMEOUT_MS });
}

async function signUp(email: string): Promise<Owner> {
  const data = unwrap(await call('POST', '/api/v1/auth/sign-up', undefined, { email, password: PASSWORD }), `sign-up ${email}`, 201).data;
  return { token: data.token, id: data.owner.id, email };
}

async function createFixtures(adminEmail: string): Promise<Fixtures> {
  const tag = randomBytes(3).toString('hex');
  const a = await signUp(adminEmail);
  const b = await signUp(`fuzz-b-${tag}@example.com`);
  const c = await signUp(`fuzz-c-${tag}@example.com`);
  const d = await signUp(`fuzz-d-${tag}@example.com`);
  for (const owner of [a, b]) unwrap(await call('PATCH', `/api/v1/admin/owners/${owner.id}`, a.token, { plan: 'enterprise' }), 'make enterprise', 200);
  const config = async (owner: Owner, name: string) =>
    unwrap(await call('POST', '/api/v1/knowledge-base/configs', owner.token, { name }), 'config', 201).data.config.id as string;
  const chat = async (owner: Owner, body: Record<string, unknown>) =>
    unwrap(await call('POST', '/api/v1/chat-interfaces', owner.token, body), 'chat interface', 201).data.chatInterface as { id: string; slug: string };
  const apiKey = async (owner: Owner, chatInterfaceId: string) =>
    unwrap(await call('POST', '/api/v1/api-keys', owner.token, { name: 'fuzz', chatInterfaceId }), 'api key', 201).data as {
      key: string;
      apiKey: { id: string };
    };
  const configA = await config(a, 'fuzz config A');
  const configB = await config(b, 'fuzz config B');
  const victimConfigA = await config(a, 'fuzz config A (mutated by the fuzz)');
  const chatA = await chat(a, { name: 'fuzz chat A', configId: configA });
  const chatB = await chat(b, { name: 'fuzz chat B', configId: configB });
  const victimChatA = (await chat(a, { name: 'fuzz chat A (mutated by the fuzz)' })).id;
  const keyA = await apiKey(a, chatA.id);
  const victimKeyA = (await apiKey(a, victimChatA)).apiKey.id;
  const keyB = (await apiKey(b, chatB.id)).apiKey.id;
  // Webhooks with a loopback URL: validate and test then never reach out (the API only stores public URLs).
  const hook = async (owner: Owner) =>
    (
      await insertWebhook(app.deps.database.db, {
        id: randomUUID(),
        owner_id: owner.id,
        url: LOOPBACK_RECEIVER,
        description: 'fuzz',
        events: ['webhook.test'],
        enabled: true,
        secret_enc: app.deps.secrets.seal(`whsec_${randomBytes(32).toString('base64')}`),
      })
    ).id;
  const hookA = await hook(a);
  const hookB = await hook(b);
  const upload = await app.upload('/api/v1/knowledge-base/documents', {
    token: b.token,
    fileName: 'b.txt',
    contentType: 'text/plain',
    bytes: Buffer.from('Owner B document.'),
    fields: { configId: configB },
  });
  if (upload.status !== 201) throw new Error(`fixture upload: ${upload.status} ${upload.text}`);
  const reply = unwrap(await call('POST', `/api/v1/chat/${chatA.slug}`, keyA.key, { message: 'hello' }), 'first chat message', 200);
  return {
    a,
    b,
    c,
    d,
    apiKeyA: keyA.key,
    configA,
    configB,
    victimConfigA,
    chatA,
    chatB,
    victimChatA,
    victimKeyA,
    keyB,
    hookA,
    hookB,
    documentB: upload.body.data.document.id,
    sessionA: reply.sessionId,
  };
}

/** The valid input each operation is fuzzed around, and the other owner's ids it must not reach. */
function baseFor(op: Operation): Base {
  const none: Base = { path: {}, query: {} };
  const unknownId = randomUUID();
  const txt = (): Multipart => ({
    parts: [
      { name: 'configId', value: fx.victimConfigA },
      { name: 'file', filename: 'fuzz.txt', contentType: 'text/plain', value: `Fuzz document ${randomUUID()}.` },
    ],
  });
  switch (op.name) {
    case 'POST /api/v1/auth/sign-up':
      return { ...none, json: () => ({ email: `fuzz-${randomBytes(6).toString('hex')}@example.com`, password: PASSWORD }) };
    case 'POST /api/v1/auth/sign-in':
      return { ...none, json: () => ({ email: fx.d.email, password: PASSWORD }) };
    case 'GET /api/v1/admin/owners':
      return { ...none, query: { limit: '10' } };
    case 'PATCH /api/v1/admin/owners/{id}':
      return { ...none, path: { id: fx.c.id }, json: () => ({ plan: 'premium' }) };
    case 'POST /api/v1/api-keys':
      return { ...none, json: () => ({ name: 'fuzz key', chatInterfaceId: fx.victimChatA }), foreign: { body: { chatInterfaceId: fx.chatB.id } } };
    case 'GET /api/v1/api-keys/{id}':
    case 'PATCH /api/v1/api-keys/{id}':
      return { ...none, path: { id: fx.victimKeyA }, json: () => ({ name: 'renamed by the fuzz' }), foreign: { path: { id: fx.keyB } } };
    case 'DELETE /api/v1/api-keys/{id}':
      return { ...none, path: { id: unknownId }, foreign: { path: { id: fx.keyB } } };
    case 'POST /api/v1/chat-interfaces':
      return { ...none, json: () => ({ name: 'fuzz interface' }), foreign: { body: { configId: fx.configB } } };
    case 'GET /api/v1/chat-interfaces/{id}':
    case 'PATCH /api/v1/chat-interfaces/{id}':
    case 'POST /api/v1/chat-interfaces/{id}/test-connection':
      return {
        ...none,
        path: { id: fx.victimChatA },
        json: () => (op.name.endsWith('test-connection') ? { message: 'ping' } : { name: 'renamed by the fuzz' }),
        foreign: { path: { id: fx.chatB.id }, body: op.method === 'PATCH' ? { configId: fx.configB } : undefined },
      };
    case 'DELETE /api/v1/chat-interfaces/{id}':
      return { ...none, path: { id: unknownId }, foreign: { path: { id: fx.chatB.id } } };
    case 'POST /api/v1/chat-interfaces/{id}/avatar':
      return {
        ...none,
        path: { id: fx.victimChatA },
        multipart: () => ({ parts: [{ name: 'file', filename: 'avatar.png', contentType: 'image/png', value: TINY_PNG }] }),
        foreign: { path: { id: fx.chatB.id } },
      };
    case 'GET /api/v1/chat-interfaces/{id}/avatar':
      return { ...none, path: { id: fx.victimChatA }, foreign: { path: { id: fx.chatB.id } } };
    case 'POST /api/v1/cache/query-cache/save':
      return { ...none, json: () => ({ data: { queries: [{ key: ['fuzz'], value: 1 }] } }) };
    case 'POST /api/v1/chat/{slug}':
      return { ...none, path: { slug: fx.chatA.slug }, json: () => ({ message: 'hello' }), foreign: { path: { slug: fx.chatB.slug } } };
    case 'GET /api/v1/chat-messages/history':
      return { ...none, query: { sessionId: fx.sessionA } };
    case 'POST /api/v1/chat-messages':
      return { ...none, json: () => ({ sessionId: fx.sessionA, message: 'operator note' }) };
    case 'POST /api/v1/knowledge-base/configs':
      return { ...none, json: () => ({ name: 'fuzz config' }) };
    case 'GET /api/v1/knowledge-base/configs/{id}':
    case 'PATCH /api/v1/knowledge-base/configs/{id}':
    case 'GET /api/v1/knowledge-base/configs/{id}/memory':
    case 'GET /api/v1/knowledge-base/configs/{id}/tools':
    case 'PATCH /api/v1/knowledge-base/configs/{id}/tools':
      return {
        ...none,
        path: { id: fx.victimConfigA },
        json: () => (op.path.endsWith('/tools') ? { tools: [{ name: 'lead_capture', enabled: true }] } : { name: 'renamed by the fuzz' }),
        foreign: { path: { id: fx.configB } },
      };
    case 'DELETE /api/v1/knowledge-base/configs/{id}':
      return { ...none, path: { id: unknownId }, foreign: { path: { id: fx.configB } } };
    case 'GET /api/v1/knowledge-base/documents':
      return { ...none, query: { configId: fx.configA }, foreign: { query: { configId: fx.configB } } };
    case 'POST /api/v1/knowledge-base/documents':
      return { ...none, multipart: txt, foreign: { body: { configId: fx.configB } } };
    case 'DELETE /api/v1/knowledge-base/documents/{id}':
      return { ...none, path: { id: unknownId }, foreign: { path: { id: fx.documentB } } };
    case 'POST /api/v1/knowledge-base/documents/bulk-delete':
      return { ...none, json: () => ({ documentIds: [unknownId] }) };
    case 'POST /api/v1/knowledge-base/query':
    case 'POST /api/v1/knowledge-base/query/stream':
      return { ...none, json: () => ({ query: 'hello', configId: fx.configA }), foreign: { body: { configId: fx.configB } } };
    case 'GET /api/v1/translations/{locale}':
      return { ...none, path: { locale: 'en' } };
    case 'POST /api/v1/enterprise/webhooks':
      // A public IP literal passes the address rule without DNS or a connection, so a create can succeed and its
      // fields reach the database; nothing is ever delivered to it (WEBHOOK_CONCURRENCY=0, and no case here
      // validates or tests a webhook other than the loopback ones).
      return { ...none, json: () => ({ url: NEVER_CONTACTED_RECEIVER, events: ['webhook.disabled'], description: 'fuzz' }) };
    case 'DELETE /api/v1/enterprise/webhooks/{webhookId}':
      return { ...none, path: { webhookId: unknownId }, foreign: { path: { webhookId: fx.hookB } } };
    case 'GET /api/v1/enterprise/webhooks/{webhookId}/deliveries':
      return { ...none, path: { webhookId: fx.hookA }, query: { limit: '10' }, foreign: { path: { webhookId: fx.hookB } } };
    case 'POST /api/v1/enterprise/webhooks/{webhookId}/replay':
      return { ...none, path: { webhookId: fx.hookA }, json: () => ({ deliveryId: unknownId }), foreign: { path: { webhookId: fx.hookB } } };
    case 'GET /api/v1/enterprise/webhooks/{webhookId}':
    case 'PATCH /api/v1/enterprise/webhooks/{webhookId}':
    case 'POST /api/v1/enterprise/webhooks/{webhookId}/test':
    case 'POST /api/v1/enterprise/webhooks/{webhookId}/validate':
    case 'POST /api/v1/enterprise/webhooks/{webhookId}/rotate-secret':
      return {
        ...none,
        path: { webhookId: fx.hookA },
        json: () => (op.method === 'PATCH' ? { description: 'changed by the fuzz' } : {}),
        foreign: { path: { webhookId: fx.hookB } },
      };
    default:
      return synthesizedBase(op);
  }
}

/** An operation added after this test: unknown ids in its path and the smallest body its schema allows. */
function synthesizedBase(op: Operation): Base {
  const synthesize = (schema: JsonSchema): unknown => {
    if (schema.anyOf || schema.oneOf) return synthesize((schema.anyOf ?? schema.oneOf).find((s: JsonSchema) => s.type !== 'null') ?? {});
    if (schema.enum) return schema.enum[0];
    if (schema.const !== undefined) return schema.const;
    switch (schema.type) {
      case 'string':
        if (schema.format === 'email') return 'fuzz@example.com';
        if (schema.format === 'uri') return LOOPBACK_RECEIVER;
        return 'x'.repeat(Math.max(1, schema.minLength ?? 1));
      case 'integer':
      case 'number':
        return schema.minimum ?? 1;
      case 'boolean':
        return true;
      case 'array':
        return Array.from({ length: schema.minItems ?? 0 }, () => synthesize(schema.items ?? {}));
      case 'object':
        return Object.fromEntries(((schema.required ?? []) as string[]).map((k) => [k, synthesize(schema.properties?.[k] ?? {})]));
      default:
        return null;
    }
  };
  const query = Object.fromEntries(op.queryParams.filter((p) => p.required).map((p) => [p.name, String(synthesize(p.schema))]));
  return {
    path: Object.fromEntries(op.pathParams.map((p) => [p.name, FREE_TEXT_PATH_PARAMS.has(p.name) ? String(synthesize(p.schema)) : randomUUID()])),
    query,
    json: op.body?.mediaType === 'json' ? () => synthesize(op.body!.schema) : undefined,
    multipart:
      op.body?.mediaType === 'multipart' ? () => ({ parts: [{ name: 'file', filename: 'fuzz.txt', contentType: 'text/plain', value: 'fuzz' }] }) : undefined,
  };
}

/** A valid credential of the operation's kind (the sign-out session is renewed after it is used up). */
let signOutToken: string | undefined;
function credentialFor(op: Operation, index: number): { token?: string; session: boolean } {
  if (op.name === 'POST /api/v1/auth/sign-out') return { token: signOutToken, session: true };
  switch (op.auth) {
    case 'P':
      return { session: false };
    case 'K':
      return { token: fx.apiKeyA, session: false };
    case 'S or K':
      return index % 2 ? { token: fx.apiKeyA, session: false } : { token: fx.a.token, session: true };
    case 'I':
      return { token: CRON_SECRET, session: false };
    default:
      // S, E and A: owner A is an admin (ADMIN_EMAILS) on the enterprise plan.
      return { token: fx.a.token, session: true };
  }
}

function requestFor(op: Operation, base: Base, c: FuzzCase): { path: string; headers: Record<string, string>; body?: Buffer } {
  let path = op.path;
  for (const param of op.pathParams) path = path.replace(`{${param.name}}`, c.path?.[param.name] ?? encodeURIComponent(base.path[param.name] ?? randomUUID()));
  const query = c.query ?? queryString(base.query);
  if (query) path += `?${query}`;
  const headers: Record<string, string> = {};
  let body: Buffer | undefined;
  if (c.body) {
    body = c.body.bytes;
    if (c.body.contentType !== null) headers['content-type'] = c.body.contentType;
  } else if (base.json && op.body?.mediaType === 'json') {
    body = serialize(base.json());
    headers['content-type'] = 'application/json';
  } else if (base.multipart && op.body?.mediaType === 'multipart') {
    const built = multipartBytes(base.multipart().parts);
    body = built.bytes;
    headers['content-type'] = built.contentType;
  }
  return { path, headers, body };
}

function summarize(c: FuzzCase, index: number): string {
  const text = `#${index} ${c.summary}`;
  return text.length > 200 ? `${text.slice(0, 199)}…` : text;
}

/** The log line of an unexpected error, by request id, so a 5xx names its cause. */
function serverReason(requestId: unknown): string | undefined {
  if (typeof requestId !== 'string') return undefined;
  const line = app.logs.find((l) => l.includes(requestId) && /"level":"error"/.test(l));
  if (!line) return undefined;
  try {
    const entry = JSON.parse(line) as { msg?: string; errorName?: string; errorMessage?: string; stack?: string };
    // The first frame in the service's own code says where to look.
    const frame = (entry.stack ?? '')
      .split('\n')
      .find((l) => /at .*\/work\/|at .*\.ts:/.test(l) && !l.includes('node_modules'))
      ?.trim();
    return excerpt(`server log: ${entry.msg}: ${entry.errorName}: ${entry.errorMessage}${frame ? ` ${frame}` : ''}`, 500);
  } catch {
    return excerpt(line, 500);
  }
}

async function runCase(op: Operation, base: Base, c: FuzzCase, index: number): Promise<void> {
  const credential = credentialFor(op, index);
  const { path, headers, body } = requestFor(op, base, c);
  if (credential.token) headers.authorization = `Bearer ${credential.token}`;
  const input = summarize(c, index);
  currentlyRunning = `${op.name} ${input}`;
  const uncaughtBefore = uncaught.length;
  requestCount++;
  if (c.truncatedTo !== undefined) {
    const outcome = await sendTruncated(app.url, {
      method: op.method,
      path,
      headers,
      body: body ?? Buffer.alloc(0),
      declaredLength: c.truncatedTo,
      timeoutMs: TRUNCATED_TIMEOUT_MS,
    });
    // The brief of this test: a timely 400 (Node's own, without an envelope, is fine here) or a close by the server.
    if (outcome.response && outcome.response.status !== 400) {
      for (const v of checkResponse(op, c, outcome.response))
        violations.push({ ...v, operation: op.name, input, detail: v.detail ?? serverReason(outcome.response.headers['x-request-id']) });
    } else if (outcome.timedOut) {
      violations.push({
        rule: 'truncated request neither answered nor closed by the server',
        operation: op.name,
        input,
        status: `none within ${TRUNCATED_TIMEOUT_MS} ms`,
        body: '',
      });
    }
  } else {
    const outcome = await sendRaw(app.url, { method: op.method, path, headers, body, timeoutMs: REQUEST_TIMEOUT_MS });
    const bucket = outcome.response ? String(outcome.response.status) : 'none';
    statusCounts[bucket] = (statusCounts[bucket] ?? 0) + 1;
    if (!outcome.response) violations.push({ rule: 'no answer', operation: op.name, input, status: outcome.failure ?? 'none', body: '' });
    else {
      for (const v of checkResponse(op, c, outcome.response)) {
        violations.push({ ...v, operation: op.name, input, detail: v.detail ?? serverReason(outcome.response.headers['x-request-id']) });
      }
      // With an API key a foreign slug is a 403 by design (README: a wrong kind of credential); the rule is about owners.
      if (c.foreign && credential.session && outcome.response.status >= 300) await compareWithUnknownId(op, base, c, outcome.response, credential.token, input);
      if (op.name === 'POST /api/v1/auth/sign-out' && outcome.response.status < 300) await renewSignOutSession();
    }
  }
  // Give an exception thrown after the answer (or instead of one) a moment to surface before blaming the next case.
  if (c.body && op.body?.mediaType === 'multipart') await new Promise((r) => setImmediate(r));
  for (const { error } of uncaught.slice(uncaughtBefore)) {
    violations.push({
      rule: 'uncaught exception in the service (kills the production process)',
      operation: op.name,
      input,
      status: 'exception',
      body: '',
      detail: excerpt(error instanceof Error ? (error.stack ?? error.message) : String(error), 600),
    });
  }
}

/** An error's observable identity, with the ids in it masked. */
function errorSignature(res: RawResponse, ids: string[]): string {
  const error = (res.body as any)?.error ?? {};
  let text = `${res.status} ${error.code} ${error.message} ${error.details}`;
  for (const id of ids) text = text.replaceAll(id, '<id>');
  return text;
}

/**
 * README: other owners' resources are 404, never 403, with the same message as a missing one. So another owner's
 * id must be answered exactly like an unknown id: the same status, code, message and details.
 */
async function compareWithUnknownId(op: Operation, base: Base, c: FuzzCase, res: RawResponse, token: string | undefined, input: string): Promise<void> {
  const { id, twin, unknownId } = c.foreign!;
  const { path, headers, body } = requestFor(op, base, twin);
  if (token) headers.authorization = `Bearer ${token}`;
  requestCount++;
  const other = await sendRaw(app.url, { method: op.method, path, headers, body, timeoutMs: REQUEST_TIMEOUT_MS });
  if (!other.response) return; // reported when the twin case itself fails
  const ids = [id, unknownId, encodeURIComponent(id)];
  const mine = errorSignature(res, ids);
  const theirs = errorSignature(other.response, ids);
  if (mine !== theirs)
    violations.push({
      rule: "another owner's id answered differently from an unknown id",
      operation: op.name,
      input,
      status: res.status,
      body: excerpt(res.text),
      detail: `unknown id: ${excerpt(other.response.text, 200)}`,
    });
}

async function renewSignOutSession(): Promise<void> {
  const res = await call('POST', '/api/v1/auth/sign-in', undefined, { email: fx.d.email, password: PASSWORD });
  signOutToken = unwrap(res, 'sign-in for sign-out', 200).data.token;
}

/** Health answers 200 and an ordinary authenticated request still works. */
async function checkHealth(after: string): Promise<void> {
  requestCount += 2;
  const health = await call('GET', '/api/v1/health/hosting');
  if (health.response?.status !== 200)
    violations.push({
      rule: 'service unhealthy afterwards',
      operation: 'GET /api/v1/health/hosting',
      input: `after ${after}`,
      status: health.response?.status ?? health.failure ?? 'none',
      body: excerpt(health.response?.text ?? ''),
    });
  const me = await call('GET', '/api/v1/auth/me', fx.a.token);
  if (me.response?.status !== 200)
    violations.push({
      rule: 'service unhealthy afterwards',
      operation: 'GET /api/v1/auth/me',
      input: `after ${after}`,
      status: me.response?.status ?? me.failure ?? 'none',
      body: excerpt(me.response?.text ?? ''),
    });
}

/** Multipart bodies cut before their closing boundary: the cases that crashed the process, run last. */
function lastCases(op: Operation, base: Base): FuzzCase[] {
  if (op.body?.mediaType !== 'multipart' || !base.multipart) return [];
  const parts = base
    .multipart()
    .parts.map((p) => (p.filename !== undefined ? { ...p, value: Buffer.concat([Buffer.from(p.value), randomBytes(64 * 1024)]) } : p));
  const whole = multipartBytes(parts);
  const cut = whole.bytes.length - 32 * 1024; // inside the file part, long before the closing boundary
  const unclosed = multipartBytes(base.multipart().parts, { closing: false });
  return [
    {
      summary: 'multipart cut inside the file part (Content-Length of the whole body), then end of request',
      body: { bytes: whole.bytes.subarray(0, cut), contentType: whole.contentType },
      truncatedTo: whole.bytes.length,
      mustReject: true,
    },
    {
      summary: 'multipart cut right after the file part headers, then end of request',
      body: { bytes: whole.bytes.subarray(0, whole.bytes.indexOf('\r\n\r\n', whole.bytes.indexOf('filename=')) + 4), contentType: whole.contentType },
      truncatedTo: whole.bytes.length,
      mustReject: true,
    },
    {
      summary: 'complete request whose multipart body has no closing boundary',
      body: { bytes: unclosed.bytes, contentType: unclosed.contentType },
      mustReject: true,
    },
  ];
}

function report(): string {
  const byRule = new Map<string, Map<string, Violation[]>>();
  for (const v of violations) {
    const ops = byRule.get(v.rule) ?? new Map<string, Violation[]>();
    byRule.set(v.rule, ops);
    ops.set(v.operation, [...(ops.get(v.operation) ?? []), v]);
  }
  const lines: string[] = [];
  for (const [rule, ops] of byRule) {
    const total = [...ops.values()].reduce((n, list) => n + list.length, 0);
    lines.push('', `== ${rule}: ${total} on ${ops.size} operation(s)`);
    for (const [operation, list] of ops) {
      lines.push(`  ${operation} (${list.length})`);
      for (const v of list.slice(0, 4)) lines.push(`    - ${v.input} -> ${v.status} ${v.body}${v.detail ? ` [${v.detail}]` : ''}`);
      if (list.length > 4) lines.push(`    … ${list.length - 4} more`);
    }
  }
  return lines.join('\n');
}

let stripe: FakeStripe | undefined;

describe('contract fuzz of every operation in the OpenAPI document', () => {
  beforeAll(async () => {
    process.on('uncaughtException', onUncaught);
    process.on('unhandledRejection', onUncaught);
    const adminEmail = `fuzz-admin-${randomBytes(4).toString('hex')}@example.com`;
    // Billing is on, against the local Stripe-speaking server: its routes are fuzzed past the "not configured" answer.
    stripe = await startFakeStripe();
    app = await startTestApp({
      ...stripeSettings(stripe, 'whsec_fuzz_0123456789abcdef'),
      ADMIN_EMAILS: adminEmail,
      CRON_SECRET,
      RATE_LIMIT_DEFAULT: '100000',
      RATE_LIMIT_CHAT: '100000',
      RATE_LIMIT_KB_QUERY: '100000',
      RATE_LIMIT_UPLOAD: '100000',
      RATE_LIMIT_VISITOR_SESSIONS: '100000',
      RATE_LIMIT_VISITOR_IP: '100000',
      RATE_LIMIT_SUPPORT: '100000',
      RATE_LIMIT_SUPPORT_GLOBAL: '100000',
      // No background work: uploads stay queued, webhook deliveries are never sent (nothing leaves this host).
      JOB_CONCURRENCY: '0',
      WEBHOOK_CONCURRENCY: '0',
    });
    fx = await createFixtures(adminEmail);
    await renewSignOutSession();
    const doc = unwrap(await call('GET', '/api/v1/openapi.json'), 'openapi.json', 200);
    operations = readOperations(doc);
    validators = createValidators(doc);
  });

  afterAll(async () => {
    process.off('uncaughtException', onUncaught);
    process.off('unhandledRejection', onUncaught);
    await app?.stop();
    await stripe?.close();
  });

  it('answers every generated bad input with a documented 4xx error envelope (or a 2xx when the input is valid) and stays healthy', {
    timeout: 240_000,
  }, async () => {
    const started = Date.now();
    expect(operations.length).toBeGreaterThan(40);
    const plans = operations.map((op) => ({ op, base: baseFor(op) }));
    for (const { op, base } of plans) {
      const cases = buildCases(op, base, validators);
      for (const [index, c] of cases.entries()) await runCase(op, base, c, index);
      await checkHealth(op.name);
    }
    // Last: the malformed multipart bodies (see the header comment).
    for (const { op, base } of plans) {
      for (const [index, c] of lastCases(op, base).entries()) {
        await runCase(op, base, c, 1000 + index);
        await checkHealth(`${op.name} ${c.summary}`);
      }
    }
    const seconds = ((Date.now() - started) / 1000).toFixed(1);
    const file = join(tmpdir(), `contract-fuzz-violations-${process.pid}.json`);
    writeFileSync(file, JSON.stringify(violations, null, 2));
    console.log(
      `contract fuzz: ${operations.length} operations, ${requestCount} requests in ${seconds} s (seed ${SEED}), statuses ${JSON.stringify(statusCounts)}, ${violations.length} violations (all of them in ${file})`,
    );
    expect(violations.length, `${violations.length} contract violations in ${requestCount} requests (seed ${SEED}; full list: ${file}):${report()}`).toBe(0);
  });
});
