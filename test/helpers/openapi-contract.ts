import { Ajv2020, type ErrorObject, type ValidateFunction } from 'ajv/dist/2020.js';
import formats from 'ajv-formats';

// ajv-formats is CommonJS: under NodeNext its default import is the module object, whose `default` is the plugin.
const addFormats = formats.default;

/**
 * Checks HTTP responses against the OpenAPI document the app under test serves, so that every response an HTTP
 * test receives also proves the document true. Responses to requests that are not operations of the document
 * (legacy unversioned paths, /trpc, /graphql, unknown routes, HEAD, methods a path does not have) are skipped.
 */

export interface ContractResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
  body: unknown;
}

interface Operation {
  responses?: Record<string, { content?: Record<string, { schema?: unknown }> }>;
}

interface PathTemplate {
  template: string;
  pattern: RegExp;
  /** Per segment, 0 for a literal and 1 for a parameter: the lower sequence is the more specific template. */
  kinds: number[];
  operations: Record<string, Operation>;
}

export interface Contract {
  document: any;
  /** The operation serving METHOD path (path without query), as the REST route table picks it, or undefined. */
  operationFor(method: string, path: string): { template: string; operation: Operation } | undefined;
  /** Problems of one response (empty when it matches the document, or when the request is not an operation). */
  problemsOf(method: string, path: string, response: ContractResponse): string[];
  /** Compiles every response schema of every operation: throws when one is not valid JSON Schema 2020-12. */
  compileAll(): number;
}

const COMPONENTS_ID = 'https://contract.invalid/components';
const HTTP_METHODS = new Set(['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace']);

/** OpenAPI 3.1 schemas are JSON Schema 2020-12 plus a few annotation keywords and formats of its own. */
function newAjv() {
  const ajv = new Ajv2020({ allErrors: true, strict: true, strictRequired: false, allowUnionTypes: true });
  addFormats(ajv);
  for (const keyword of ['example', 'discriminator', 'xml', 'externalDocs']) ajv.addKeyword(keyword);
  for (const format of ['binary', 'byte', 'int32', 'int64', 'float', 'double', 'password']) ajv.addFormat(format, true);
  return ajv;
}

/** Local component refs point into one schema holding every component under $defs, so each response schema compiles on its own. */
const rewriteRefs = (schema: unknown): unknown => JSON.parse(JSON.stringify(schema).replaceAll('"#/components/schemas/', `"${COMPONENTS_ID}#/$defs/`));

function templateOf(template: string, operations: Record<string, Operation>): PathTemplate {
  const segments = template.split('/').filter(Boolean);
  const kinds: number[] = [];
  const source = segments
    .map((segment) => {
      const param = /^\{[^/}]+\}$/.test(segment);
      kinds.push(param ? 1 : 0);
      if (param) {
        return '[^/]+';
      }
      return segment.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
    })
    .join('/');
  // The REST adapter accepts one trailing slash, so the same request is the same operation here.
  return { template, pattern: new RegExp(`^/${source}/?$`), kinds, operations };
}

const formatErrors = (errors: ErrorObject[] | null | undefined) =>
  (errors ?? [])
    .slice(0, 10)
    .map((e) => `${e.instancePath || '(body)'} ${e.message ?? ''}${e.params && Object.keys(e.params).length ? ` ${JSON.stringify(e.params)}` : ''}`.trim());

export function buildContract(document: any): Contract {
  const ajv = newAjv();
  ajv.addSchema({ $id: COMPONENTS_ID, $defs: rewriteRefs(document.components?.schemas ?? {}) as object });
  const templates = Object.entries((document.paths ?? {}) as Record<string, Record<string, Operation>>).map(([template, item]) =>
    templateOf(template, Object.fromEntries(Object.entries(item).filter(([method]) => HTTP_METHODS.has(method)))),
  );
  // As the route table does: at the first segment two templates differ, a literal beats a parameter.
  const specificity = (a: PathTemplate, b: PathTemplate) => {
    for (let i = 0; i < Math.min(a.kinds.length, b.kinds.length); i++) if (a.kinds[i] !== b.kinds[i]) return a.kinds[i]! - b.kinds[i]!;
    return a.kinds.length - b.kinds.length;
  };
  templates.sort(specificity);
  const validators = new Map<string, ValidateFunction>();
  const validatorFor = (key: string, schema: unknown) => {
    const cached = validators.get(key);
    if (cached) return cached;
    const validate = ajv.compile(rewriteRefs(schema) as object);
    validators.set(key, validate);
    return validate;
  };

  const operationFor: Contract['operationFor'] = (method, path) => {
    const verb = method.toLowerCase();
    if (verb === 'head') return undefined; // answered like GET without a body; not an operation of its own
    // A path belongs to its most specific template whatever the method: another method there is a 405, no operation.
    const t = templates.find((candidate) => candidate.pattern.test(path));
    const operation = t?.operations[verb];
    return t && operation ? { template: t.template, operation } : undefined;
  };

  return {
    document,
    operationFor,
    compileAll() {
      let count = 0;
      for (const t of templates) {
        for (const [method, operation] of Object.entries(t.operations)) {
          for (const [status, response] of Object.entries(operation.responses ?? {})) {
            for (const [mediaType, media] of Object.entries(response.content ?? {})) {
              if (media.schema === undefined) continue;
              validatorFor(`${t.template} ${method} ${status} ${mediaType}`, media.schema);
              count++;
            }
          }
        }
      }
      return count;
    },
    problemsOf(method, path, response) {
      const found = operationFor(method, path);
      if (!found) return [];
      const responses = found.operation.responses ?? {};
      const documented = responses[String(response.status)] ?? responses[`${String(response.status)[0]}XX`] ?? responses.default;
      if (!documented) return [`status ${response.status} is not documented (documented: ${Object.keys(responses).join(', ')})`];
      const content = documented.content ?? {};
      const header = response.headers['content-type'];
      const mediaType = (Array.isArray(header) ? header[0] : header)?.split(';')[0]?.trim().toLowerCase();
      if (Object.keys(content).length === 0)
        return response.text === '' ? [] : [`a body (${mediaType ?? 'no content type'}) where the document says there is none`];
      if (!mediaType) return [`no Content-Type; documented: ${Object.keys(content).join(', ')}`];
      const media = content[mediaType];
      if (!media) return [`content type ${mediaType} is not documented for ${response.status} (documented: ${Object.keys(content).join(', ')})`];
      if (media.schema === undefined) return [];
      const isJson = mediaType === 'application/json' || mediaType.endsWith('+json');
      if (isJson && response.body === undefined) return ['the body is not JSON'];
      // Non-JSON bodies are checked as the text they are (an SSE stream is a string); binary ones only by type.
      if (!isJson && (media.schema as { format?: string }).format === 'binary') return [];
      const validate = validatorFor(`${found.template} ${method.toLowerCase()} ${response.status} ${mediaType}`, media.schema);
      return validate(isJson ? response.body : response.text) ? [] : formatErrors(validate.errors);
    },
  };
}

const contracts = new Map<string, Promise<Contract>>();

/** The contract of the app at baseUrl, from the document it serves: fetched once per running app. */
export function contractFor(baseUrl: string, fetchDocument: () => Promise<ContractResponse>): Promise<Contract> {
  const key = new URL(baseUrl).origin;
  let contract = contracts.get(key);
  if (!contract) {
    contract = fetchDocument().then((res) => {
      if (res.status !== 200 || typeof res.body !== 'object' || res.body === null) {
        throw new Error(`GET /api/v1/openapi.json of ${key} answered ${res.status}: cannot check responses against it`);
      }
      return buildContract(res.body);
    });
    // A failed fetch is not cached: the next call tries again.
    contract.catch(() => contracts.delete(key));
    contracts.set(key, contract);
  }
  return contract;
}

/** Throws an Error naming the request, the status and every mismatch when the response contradicts the document. */
export function assertMatchesContract(contract: Contract, method: string, path: string, response: ContractResponse) {
  const pathname = new URL(path, 'https://service.invalid').pathname;
  const problems = contract.problemsOf(method, pathname, response);
  if (problems.length === 0) return;
  const template = contract.operationFor(method, pathname)?.template;
  throw new Error(
    `Response does not match the OpenAPI document: ${method.toUpperCase()} ${pathname} (operation ${template}) answered ${response.status}:\n` +
      problems.map((p) => `  - ${p}`).join('\n') +
      `\n  body: ${response.text.slice(0, 500)}`,
  );
}
