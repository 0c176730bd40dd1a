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
  '$recursiveRef',
  '$recursiveAnchor',
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

/** The interpreter of an owner's schema, cached by its text. Throws when the schema cannot be loaded (two equal ids). */
function ownerValidator(schema: JsonSchema): Validator {
  const key = JSON.stringify(schema);
  let validator = ownerValidators.get(key);
  if (!validator) {
    validator = new Validator(schema, '2020-12', true);
    if (ownerValidators.size >= OWNER_CACHE_LIMIT) ownerValidators.delete(ownerValidators.keys().next().value!);
    ownerValidators.set(key, validator);
  }
  return validator;
}

/**
 * Why the interpreter cannot load an owner's schema (it holds the same id twice), or null. `keep` caches the loaded
 * interpreter for the calls to come; a settings check keeps nothing (most attempts are never called).
 */
function unloadableReason(schema: JsonSchema, keep: boolean): string | null {
  try {
    if (keep) ownerValidator(schema);
    else new Validator(schema, '2020-12', true);
    return null;
  } catch (error) {
    return (error instanceof Error ? error.message : String(error)).slice(0, 200);
  }
}

/**
 * Why an owner's stored input schema cannot be run, or null: a keyword outside the safe subset (stored before the
 * check was complete), or a schema the interpreter cannot load. Checked before each use; its patterns would run on
 * the request thread.
 */
export function ownerSchemaRefusal(schema: JsonSchema): string | null {
  const keyword = forbiddenKeyword(schema, 'inputSchema');
  if (keyword) return `The tool's input schema uses ${keyword}, which is not allowed: save the tool's settings again without it`;
  const unloadable = unloadableReason(schema, true);
  if (unloadable) return `The tool's input schema cannot be used (${unloadable}): save the tool's settings again without it`;
  return null;
}

/**
 * The check of an owner-written schema (already held to the safe subset and loadable: ownerSchemaRefusal), interpreted. Of the problems found, the
 * last is the deepest (the interpreter reports a property's mismatch before what inside it did not match).
 */
export function ownerSchemaCheck(schema: JsonSchema): SchemaCheck {
  const interpreter = ownerValidator(schema);
  return (value) => {
    const { valid, errors } = interpreter.validate(value);
    if (valid) return null;
    const issue = errors.at(-1);
    const where = issue?.instanceLocation.replace(/^#/, '') || '(input)';
    return `${where} ${issue?.error ?? 'does not match the schema'}`;
  };
}

/** Keywords whose value maps names (the owner's, not keywords) to schemas. */
const SCHEMA_MAPS = new Set(['properties', 'patternProperties', 'dependentSchemas', '$defs', 'definitions']);
/** Keywords whose value is a schema, or (`items` in older drafts) an array of schemas. */
const SCHEMA_VALUES = new Set([
  'additionalProperties',
  'items',
  'additionalItems',
  'contains',
  'not',
  'if',
  'then',
  'else',
  'propertyNames',
  'unevaluatedItems',
  'unevaluatedProperties',
  'contentSchema',
]);
/** Keywords whose value is an array of schemas. */
const SCHEMA_ARRAYS = new Set(['allOf', 'anyOf', 'oneOf', 'prefixItems']);

const isPlainObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

/**
 * The first forbidden keyword anywhere in a value that is not in a schema position (an unknown keyword's value,
 * `enum`, `default`...): every key counts, names included, so nothing is exempted by a guess.
 */
function forbiddenAnywhere(value: unknown, path: string): string | null {
  if (Array.isArray(value)) {
    for (const [i, item] of value.entries()) {
      const found = forbiddenAnywhere(item, `${path}.${i}`);
      if (found) return found;
    }
    return null;
  }
  if (!isPlainObject(value)) return null;
  for (const [key, item] of Object.entries(value)) {
    if (FORBIDDEN_KEYWORDS.has(key)) return `${path}.${key}`;
    const found = forbiddenAnywhere(item, `${path}.${key}`);
    if (found) return found;
  }
  return null;
}

/**
 * The first keyword of an owner's schema that is not allowed, with where it is. Walked by position, as the
 * validator reads it: a name map's keys (`properties`, `dependentSchemas`) are the owner's names and each value is a
 * schema again; any other keyword's value is walked with every key counted. An attack pass got `$ref` past a walk
 * that took every key named `properties` for the keyword (`dependentSchemas: {properties: {$ref: ...}}`): references
 * that doubled at each level held the request thread for seconds per tool call.
 */
function forbiddenKeyword(schema: unknown, path: string): string | null {
  if (!isPlainObject(schema)) return Array.isArray(schema) ? forbiddenAnywhere(schema, path) : null;
  for (const [key, value] of Object.entries(schema)) {
    const at = `${path}.${key}`;
    if (FORBIDDEN_KEYWORDS.has(key)) return at;
    let found: string | null;
    if (SCHEMA_MAPS.has(key) && isPlainObject(value)) {
      found = null;
      for (const [name, sub] of Object.entries(value)) {
        found = forbiddenKeyword(sub, `${at}.${name}`);
        if (found) break;
      }
    } else if ((SCHEMA_VALUES.has(key) || SCHEMA_ARRAYS.has(key)) && Array.isArray(value)) {
      found = null;
      for (const [i, sub] of value.entries()) {
        found = forbiddenKeyword(sub, `${at}.${i}`);
        if (found) break;
      }
    } else if (SCHEMA_VALUES.has(key)) {
      found = forbiddenKeyword(value, at);
    } else {
      found = forbiddenAnywhere(value, at);
    }
    if (found) return found;
  }
  return null;
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
    const unloadable = unloadableReason(inputSchema as JsonSchema, false);
    if (unloadable) throw invalid(`settings.inputSchema: not a usable JSON Schema (${unloadable})`);
  }
  const validate = toolkitValidator(toolkit.settingsSchema);
  if (!validate(settings)) {
    const issue = validate.errors?.[0];
    throw invalid(`settings${issue?.instancePath.replaceAll('/', '.') ?? ''}: ${issue?.message ?? 'does not match the toolkit’s settings'}`);
  }
  const problem = toolkit.settingsProblem?.(settings);
  if (problem !== undefined) throw invalid(problem);
}
