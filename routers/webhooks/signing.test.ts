import fc from 'fast-check';
import { Webhook } from 'standardwebhooks';
import { describe, expect, it } from 'vitest';
import { AppError } from '../../schema/errors.ts';
import { assertValidSecret, generateSecret, signatureHeader } from './signing.ts';

const secretOf = (bytes: Uint8Array | Buffer) => 'whsec_' + Buffer.from(bytes).toString('base64');
const nowSeconds = () => Math.floor(Date.now() / 1000);

function headersFor(id: string, timestamp: number, signature: string) {
  return { 'webhook-id': id, 'webhook-timestamp': String(timestamp), 'webhook-signature': signature };
}

function validationError(secret: string): AppError {
  try {
    assertValidSecret(secret);
  } catch (error) {
    expect(error).toBeInstanceOf(AppError);
    return error as AppError;
  }
  throw new Error(`accepted ${JSON.stringify(secret)}`);
}

describe('generateSecret', () => {
  it("is 'whsec_' and the standard base64 of 32 random bytes", () => {
    const secrets = Array.from({ length: 20 }, generateSecret);
    for (const secret of secrets) {
      expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
      const key = Buffer.from(secret.slice('whsec_'.length), 'base64');
      expect(key).toHaveLength(32);
      expect(secretOf(key)).toBe(secret);
      expect(() => assertValidSecret(secret)).not.toThrow();
    }
    expect(new Set(secrets).size).toBe(secrets.length);
  });
});

describe('assertValidSecret', () => {
  it('accepts 24 to 64 bytes of standard base64 after whsec_', () => {
    for (const size of [24, 25, 32, 48, 63, 64]) expect(() => assertValidSecret(secretOf(Buffer.alloc(size, size))), String(size)).not.toThrow();
  });

  it('refuses fewer than 24 bytes', () => {
    for (const size of [1, 16, 23]) {
      const error = validationError(secretOf(Buffer.alloc(size, 3)));
      expect(error.code).toBe('VALIDATION_FAILED');
      expect(error.details).toMatch(/^secret: .*at least 24/);
    }
  });

  it('refuses more than 64 bytes', () => {
    for (const size of [65, 128]) {
      const error = validationError(secretOf(Buffer.alloc(size, 4)));
      expect(error.code).toBe('VALIDATION_FAILED');
      expect(error.details).toMatch(/^secret: .*at most 64/);
    }
  });

  it('refuses a missing or different prefix', () => {
    const body = Buffer.alloc(32, 5).toString('base64');
    for (const secret of [body, 'WHSEC_' + body, 'whsec-' + body, 'wh_' + body, ' whsec_' + body, 'sk_' + body]) {
      const error = validationError(secret);
      expect(error.code, secret).toBe('VALIDATION_FAILED');
      expect(error.details, secret).toMatch(/^secret: must be 'whsec_'/);
    }
  });

  it('refuses what is not standard base64', () => {
    const b64 = Buffer.alloc(32, 0xfb).toString('base64'); // has '+' and '/'
    for (const secret of [
      'whsec_',
      'whsec_not base64 at all!!',
      'whsec_' + b64.replace(/=+$/, ''), // padding left off
      'whsec_' + b64.replace(/\+/g, '-').replace(/\//g, '_'), // base64url
      'whsec_' + b64 + '=', // too much padding
      'whsec_' + b64.slice(0, 20) + '=' + b64.slice(21), // padding in the middle
      'whsec_' + b64 + '\n',
    ]) {
      const error = validationError(secret);
      expect(error.code, JSON.stringify(secret)).toBe('VALIDATION_FAILED');
      expect(error.details, JSON.stringify(secret)).toMatch(/^secret: must be 'whsec_' followed by standard base64/);
    }
  });
});

describe('signatureHeader', () => {
  const body = JSON.stringify({ id: 'evt_1', type: 'webhook.test', timestamp: new Date().toISOString(), data: { message: 'héllo ✓' } });

  it('produces a v1 signature the standardwebhooks library verifies', () => {
    const secret = generateSecret();
    const timestamp = nowSeconds();
    const header = signatureHeader([secret], 'evt_1', timestamp, body);
    expect(header).toMatch(/^v1,[A-Za-z0-9+/]{43}=$/);
    expect(new Webhook(secret).verify(body, headersFor('evt_1', timestamp, header))).toEqual(JSON.parse(body));
    // The library's own signature is the same string.
    expect(new Webhook(secret).sign('evt_1', new Date(timestamp * 1000), body)).toBe(header);
    // Bound to the id, the timestamp and the secret.
    expect(() => new Webhook(secret).verify(body, headersFor('evt_2', timestamp, header))).toThrow(/signature/i);
    expect(() => new Webhook(secret).verify(body, headersFor('evt_1', timestamp - 1, header))).toThrow(/signature/i);
    expect(() => new Webhook(generateSecret()).verify(body, headersFor('evt_1', timestamp, header))).toThrow(/signature/i);
  });

  it('with two secrets (rotation) gives two space-separated v1 signatures, each verifying with its own secret', () => {
    const current = generateSecret();
    const previous = secretOf(Buffer.alloc(24, 9)); // an owner-supplied one of the minimum size
    const timestamp = nowSeconds();
    const header = signatureHeader([current, previous], 'evt_9', timestamp, body);
    const parts = header.split(' ');
    expect(parts).toHaveLength(2);
    for (const part of parts) expect(part).toMatch(/^v1,[A-Za-z0-9+/]{43}=$/);
    expect(parts[0]).not.toBe(parts[1]);
    expect(parts[0]).toBe(signatureHeader([current], 'evt_9', timestamp, body));
    expect(parts[1]).toBe(signatureHeader([previous], 'evt_9', timestamp, body));
    // The whole header verifies with either secret …
    expect(new Webhook(current).verify(body, headersFor('evt_9', timestamp, header))).toEqual(JSON.parse(body));
    expect(new Webhook(previous).verify(body, headersFor('evt_9', timestamp, header))).toEqual(JSON.parse(body));
    expect(() => new Webhook(generateSecret()).verify(body, headersFor('evt_9', timestamp, header))).toThrow(/signature/i);
    // … and each signature only with its own.
    expect(() => new Webhook(current).verify(body, headersFor('evt_9', timestamp, parts[0]!))).not.toThrow();
    expect(() => new Webhook(previous).verify(body, headersFor('evt_9', timestamp, parts[0]!))).toThrow(/signature/i);
    expect(() => new Webhook(previous).verify(body, headersFor('evt_9', timestamp, parts[1]!))).not.toThrow();
    expect(() => new Webhook(current).verify(body, headersFor('evt_9', timestamp, parts[1]!))).toThrow(/signature/i);
  });

  it('refuses to sign with a malformed stored secret', () => {
    expect(() => signatureHeader(['not-a-secret'], 'evt_1', nowSeconds(), body)).toThrow(/malformed/);
  });

  it('property: for any body and id the library verifies the signature, and a one-character change of the body fails', () => {
    const secret = fc.uint8Array({ minLength: 24, maxLength: 64 }).map(secretOf);
    // Whole code points (no lone surrogates, which UTF-8 cannot carry and would encode alike).
    const char = fc.string({ unit: 'binary', minLength: 1, maxLength: 1 });
    const bodyAndChange = fc
      // Short bodies and long ones (fast-check would otherwise keep arrays small).
      .tuple(fc.oneof(fc.array(char, { minLength: 1, maxLength: 20 }), fc.array(char, { minLength: 1, maxLength: 500, size: 'max' })), fc.nat(), char)
      .filter(([chars, at, replacement]) => chars[at % chars.length] !== replacement);
    const id = fc.oneof(fc.uuid(), fc.string({ minLength: 1, maxLength: 64 }));
    fc.assert(
      fc.property(secret, id, bodyAndChange, fc.integer({ min: -240, max: 240 }), (key, webhookId, [chars, at, replacement], skew) => {
        const payload = chars.join('');
        const timestamp = nowSeconds() + skew;
        const header = signatureHeader([key], webhookId, timestamp, payload);
        const headers = headersFor(webhookId, timestamp, header);
        const webhook = new Webhook(key);
        expect(() => webhook.verify(payload, headers, { jsonParse: false })).not.toThrow();
        const changed = [...chars];
        changed[at % chars.length] = replacement;
        const tampered = changed.join('');
        expect(tampered).not.toBe(payload);
        expect(() => webhook.verify(tampered, headers, { jsonParse: false })).toThrow(/No matching signature/);
      }),
      { numRuns: 200 },
    );
  });
});
