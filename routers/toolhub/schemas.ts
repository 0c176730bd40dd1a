import { Validator } from '@cfworker/json-schema';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { AppError } from '../../schema/errors.ts';
import type { JsonSchema, Toolkit } from './toolkit.ts';

/**
 * JSON Schema handling for tools. Two validators, by who wrote the schema:
 *
 * - The toolkits' own schemas (settings, built-in tools' inputs) are module constants: ajv compiles each once, by
 *   identity, with formats and patterns.
 * - Schemas owners write (the generic HTTP tool's input schema) run on model output on the request thread, so they
 *   are held to a subset without regular expressions (`pattern` can backtrack for seconds), formats, references or
 *   ids, and a size cap, and are interpreted (@cfworker/json-schema), never compiled: ajv keeps every schema it
 *   compiles, and its generated code, for the instance's life (about 280 KB for a 16,000-character schema, whatever
 *   `addUsedSchema` or `removeSchema` say), and V8 keeps compiled source of its own, so each owner's attempt grew
 *   memory for good. Interpreters are cached by the schema's text (bounded) and are plain data when dropped.
 */
const ajv = new Ajv2020({ allErrors: false, strict: false, addUsedSchema: false });
addFormats.default(ajv);

const MAX_SCHEMA_CHARS = 16_000;
const MAX_SETTINGS_CHARS = 32_000;
const FORBIDDEN_KEYWORDS = new Set([
  'pattern',
  'patternProperties',
  '$ref',
  '$dynamicRef',
  '$id',
  '$anchor',
  '$dynamicAnchor',
  '$defs',
  'definitions',
  'format',
]);

/** A value's first mismatch with a schema as `<where> <what>`, or null when it matches. */
export type SchemaCheck = (value: unknown) => string | null;

const toolkitValidators = new Map<JsonSchema, ValidateFunction>();

/** ajv's validator of one of the toolkits' own schemas (a module constant: compiled once). */
function toolkitValidator(schema: JsonSchema): ValidateFunction {
  let validate = toolkitValidators.get(schema);
  if (!validate) {
    validate = ajv.compile(schema);
    toolkitValidators.set(schema, validate);
  }
  return validate;
}

/** The check of one of the toolkits' own schemas. */
export function toolkitSchemaCheck(schema: JsonSchema): SchemaCheck {
  const validate = toolkitValidator(schema);
  return (value) => {
    if (validate(value)) return null;
    const issue = validate.errors?.[0];
    return `${issue?.instancePath || '(input)'} ${issue?.message ?? 'does not match the schema'}`;
  };
}

const OWNER_CACHE_LIMIT = 256;
const ownerValidators = new Map<string, Validator>();

/**
 * The check of an owner-written schema (already held to the safe subset), interpreted. Of the problems found, the
 * last is the deepest (the interpreter reports a property's mismatch before what inside it did not match).
 */
export function ownerSchemaCheck(schema: JsonSchema): SchemaCheck {
  const key = JSON.stringify(schema);
  let validator = ownerValidators.get(key);
  if (!validator) {
    validator = new Validator(schema, '2020-12', true);
    if (ownerValidators.size >= OWNER_CACHE_LIMIT) ownerValidators.delete(ownerValidators.keys().next().value!);
    ownerValidators.set(key, validator);
  }
  const interpreter = validator;
  return (value) => {
    const { valid, errors } = interpreter.validate(value);
    if (valid) return null;
    const issue = errors.at(-1);
    const where = issue?.instanceLocation.replace(/^#/, '') || '(input)';
    return `${where} ${issue?.error ?? 'does not match the schema'}`;
  };
}

/**
 * The first keyword of an owner's schema that is not allowed, with where it is. `names` marks a `properties` map,
 * whose keys are the owner's property names, not keywords; each of its values is a schema again, checked in full
 * (a property named `properties` must not smuggle a `pattern` past the check). Decided by the structure, never by
 * the path's text.
 */
function forbiddenKeyword(value: unknown, path: string, names = false): string | null {
  if (Array.isArray(value)) {
    for (const [i, item] of value.entries()) {
      const found = forbiddenKeyword(item, `${path}.${i}`);
      if (found) return found;
    }
    return null;
  }
  if (typeof value !== 'object' || value === null) return null;
  for (const [key, item] of Object.entries(value)) {
    if (!names && FORBIDDEN_KEYWORDS.has(key)) return `${path}.${key}`;
    const found = forbiddenKeyword(item, `${path}.${key}`, !names && key === 'properties');
    if (found) return found;
  }
  return null;
}

/** Where an owner-written input schema uses a keyword that is not allowed, or null. */
export function forbiddenSchemaKeyword(schema: unknown): string | null {
  return forbiddenKeyword(schema, 'inputSchema');
}

/** An account's settings, checked against its toolkit's settings schema (and an owner-written schema against the safe subset). */
export function checkSettings(toolkit: Toolkit, settings: Record<string, unknown>) {
  const invalid = (details: string) => new AppError('VALIDATION_FAILED', 'Invalid request parameters', details);
  if ((JSON.stringify(settings) ?? '').length > MAX_SETTINGS_CHARS) throw invalid(`settings: at most ${MAX_SETTINGS_CHARS} characters of JSON`);
  const inputSchema = settings.inputSchema;
  if (inputSchema !== undefined) {
    if ((JSON.stringify(inputSchema) ?? '').length > MAX_SCHEMA_CHARS) throw invalid(`settings.inputSchema: at most ${MAX_SCHEMA_CHARS} characters of JSON`);
    const keyword = forbiddenKeyword(inputSchema, 'settings.inputSchema');
    if (keyword) throw invalid(`${keyword}: not allowed in a tool's input schema (no patterns, formats or references)`);
    // Checked against the draft's meta-schema, not compiled (see above): no per-schema code. ajv throws, rather than
    // answers false, for a `$schema` it does not know or that is not a string.
    let reason: string | undefined;
    try {
      if (!ajv.validateSchema(inputSchema as JsonSchema)) reason = ajv.errorsText(ajv.errors, { dataVar: 'inputSchema' });
    } catch (error) {
      reason = error instanceof Error ? error.message : 'invalid';
    }
    if (reason !== undefined) throw invalid(`settings.inputSchema: not a valid JSON Schema (${reason.slice(0, 200)})`);
  }
  const validate = toolkitValidator(toolkit.settingsSchema);
  if (!validate(settings)) {
    const issue = validate.errors?.[0];
    throw invalid(`settings${issue?.instancePath.replaceAll('/', '.') ?? ''}: ${issue?.message ?? 'does not match the toolkit’s settings'}`);
  }
  const problem = toolkit.settingsProblem?.(settings);
  if (problem !== undefined) throw invalid(problem);
}
