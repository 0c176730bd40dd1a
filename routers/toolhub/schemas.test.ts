import { describe, expect, it } from 'vitest';
import { retainedHeapBytes } from '../../test/helpers/retained-heap.ts';
import { AppError } from '../../schema/errors.ts';
import { checkSettings, ownerSchemaCheck, ownerSchemaRefusal, toolkitSchemaCheck } from './schemas.ts';
import { httpToolkit } from './toolkits/http-tool.ts';

/** A schema of about 15,700 characters of JSON, a new object each call (as every request body makes one). */
function largeInputSchema(seed: number) {
  const properties: Record<string, unknown> = {};
  for (let i = 0; i < 118; i++) {
    properties[`field_${seed}_${i}`] = {
      type: 'object',
      properties: { a: { type: 'string', maxLength: 10 }, b: { type: 'integer', minimum: 0 } },
      required: ['a'],
    };
  }
  return { type: 'object', properties };
}

const ownerSchema = {
  type: 'object',
  properties: { n: { type: 'integer', minimum: 1 }, tags: { type: 'array', items: { type: 'string', maxLength: 3 } } },
  required: ['n'],
  additionalProperties: false,
};

const settingsRefusal = (inputSchema: unknown) => {
  try {
    checkSettings(httpToolkit, { url: 'https://example.com/hook', description: 'Looks things up', inputSchema });
    return null;
  } catch (error) {
    return error instanceof AppError ? error.details : error;
  }
};

describe('tool schemas', () => {
  it('an owner’s schema is checked by the interpreter, naming the deepest mismatch', () => {
    const check = ownerSchemaCheck(ownerSchema);
    expect(check({ n: 2, tags: ['a'] })).toBeNull();
    expect(check({ n: 0 })).toBe('/n 0 is less than 1.');
    expect(check({ n: 1, tags: ['abcd'] })).toBe('/tags/0 String is too long (4 > 3).');
    expect(check({})).toBe('(input) Instance does not have required property "n".');
    expect(check('text')).toBe('(input) Instance type "string" is invalid. Expected "object".');
    expect(check({ n: 1, extra: true })).toMatch(/^\/extra /);
  });

  it('a toolkit’s own schema is checked by ajv, with its formats', () => {
    const check = toolkitSchemaCheck(httpToolkit.settingsSchema);
    const settings = { url: 'https://example.com/hook', inputSchema: { type: 'object' }, description: 'Looks things up' };
    expect(check(settings)).toBeNull();
    expect(check({ ...settings, url: 'ftp://example.com' })).toMatch(/^\/url /);
    expect(check({ ...settings, url: 'https://exa mple.com' })).toBe('/url must match format "uri"');
  });

  it('an input schema that is not JSON Schema is refused by its settings check', () => {
    expect(settingsRefusal({ type: 'object', required: 'n' })).toBe('settings.inputSchema: not a valid JSON Schema (inputSchema/required must be array)');
    expect(settingsRefusal({ type: 'object', properties: { n: { type: 'number', minimum: 'one' } } })).toMatch(
      /^settings\.inputSchema: not a valid JSON Schema \(/,
    );
    // ajv throws for these instead of answering: still a refusal, never an unexpected error.
    expect(settingsRefusal({ type: 'object', $schema: 'https://example.com/unknown-draft' })).toMatch(
      /^settings\.inputSchema: not a valid JSON Schema \(no schema with key or ref/,
    );
    expect(settingsRefusal({ type: 'object', $schema: 12 })).toBe('settings.inputSchema: not a valid JSON Schema ($schema must be a string)');
    expect(settingsRefusal(ownerSchema)).toBeNull();
  });

  it('forbidden keywords are found by schema position: owners’ names are exempt, nothing else is', () => {
    const notAllowed = (where: string) => `${where}: not allowed in a tool's input schema (no patterns, formats or references)`;
    // The attack pass's schema: a reference under a dependent schema for a property named `properties`.
    expect(settingsRefusal({ type: 'object', dependentSchemas: { properties: { $ref: '#' } } })).toBe(
      notAllowed('settings.inputSchema.dependentSchemas.properties.$ref'),
    );
    expect(settingsRefusal({ type: 'object', properties: { properties: { type: 'string', pattern: 'a+' } } })).toBe(
      notAllowed('settings.inputSchema.properties.properties.pattern'),
    );
    expect(settingsRefusal({ type: 'array', items: { $recursiveRef: '#' } })).toBe(notAllowed('settings.inputSchema.items.$recursiveRef'));
    expect(settingsRefusal({ anyOf: [{ type: 'string' }, { type: 'string', format: 'email' }] })).toBe(notAllowed('settings.inputSchema.anyOf.1.format'));
    expect(settingsRefusal({ type: 'object', not: { $defs: {} } })).toBe(notAllowed('settings.inputSchema.not.$defs'));
    // Data is walked with every key counted, names included.
    expect(settingsRefusal({ type: 'object', default: { properties: { $ref: 'x' } } })).toBe(notAllowed('settings.inputSchema.default.properties.$ref'));
    // One the interpreter cannot load (an id twice) is refused when saved, and refused at use when stored before.
    const twice = { type: 'object', properties: { a: { id: 'https://x.test/y' }, b: { id: 'https://x.test/y' } } };
    expect(settingsRefusal(twice)).toBe('settings.inputSchema: not a usable JSON Schema (Duplicate schema URI "https://x.test/y".)');
    expect(ownerSchemaRefusal(twice)).toBe(
      'The tool\'s input schema cannot be used (Duplicate schema URI "https://x.test/y".): save the tool\'s settings again without it',
    );
    expect(ownerSchemaRefusal({ type: 'object', dependentSchemas: { properties: { $ref: '#' } } })).toBe(
      "The tool's input schema uses inputSchema.dependentSchemas.properties.$ref, which is not allowed: save the tool's settings again without it",
    );
    expect(ownerSchemaRefusal(ownerSchema)).toBeNull();
    // Owners' property names may be anything, keywords included.
    expect(
      settingsRefusal({
        type: 'object',
        properties: { pattern: { type: 'string' }, $ref: { type: 'integer' }, properties: { type: 'object', properties: { format: { type: 'string' } } } },
        dependentSchemas: { pattern: { required: ['format'] } },
      }),
    ).toBeNull();
  });

  it('checking owners’ input schemas keeps none of them: memory does not grow with each attempt', () => {
    // Refused (no url), as the attack sends them: the schema is checked before the settings are.
    const attempt = (seed: number) => expect(() => checkSettings(httpToolkit, { inputSchema: largeInputSchema(seed) })).toThrow(AppError);
    attempt(-1);
    const before = retainedHeapBytes();
    for (let i = 0; i < 80; i++) attempt(i);
    expect(retainedHeapBytes() - before).toBeLessThan(1024 * 1024);
  });
});
