import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { AppError } from '../../schema/errors.ts';
import type { JsonSchema, Toolkit } from './toolkit.ts';

/**
 * JSON Schema handling for tools. Schemas owners write (the generic HTTP tool's input schema) are compiled by
 * ajv and then run on model output on the request thread, so they are held to a subset without regular
 * expressions (`pattern` can backtrack for seconds), references or ids, and a size cap; compiled validators are
 * cached by their text (bounded), and ajv keeps none of them itself.
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
const CACHE_LIMIT = 256;
const cache = new Map<string, ValidateFunction>();

export function validatorOf(schema: JsonSchema): ValidateFunction {
  const key = JSON.stringify(schema);
  let validate = cache.get(key);
  if (!validate) {
    validate = ajv.compile(schema);
    if (cache.size >= CACHE_LIMIT) cache.delete(cache.keys().next().value!);
    cache.set(key, validate);
  }
  return validate;
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
    try {
      ajv.compile(inputSchema as JsonSchema);
    } catch (error) {
      throw invalid(`settings.inputSchema: not a valid JSON Schema (${error instanceof Error ? error.message.slice(0, 200) : 'invalid'})`);
    }
  }
  const validate = validatorOf(toolkit.settingsSchema);
  if (!validate(settings)) {
    const issue = validate.errors?.[0];
    throw invalid(`settings${issue?.instancePath.replaceAll('/', '.') ?? ''}: ${issue?.message ?? 'does not match the toolkit’s settings'}`);
  }
  const problem = toolkit.settingsProblem?.(settings);
  if (problem !== undefined) throw invalid(problem);
}
