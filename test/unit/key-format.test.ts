import { crc32 } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { API_KEY_PREFIX, displayPrefix, generateApiKey, parseApiKey } from '../../routers/api-keys/key-format.ts';

const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const KEY_SHAPE = /^svc_[0-9A-Za-z]{38}$/;

/** Independent re-implementation of the checksum (CRC32 of `svc_` + random part, 6 base62 digits, big-endian). */
function expectedChecksum(body: string): string {
  let rest = crc32(body);
  let out = '';
  for (let i = 0; i < 6; i++) {
    out = ALPHABET[rest % 62]! + out;
    rest = Math.floor(rest / 62);
  }
  return out;
}
const withChecksum = (body: string) => body + expectedChecksum(body);
const replaceAt = (s: string, i: number, c: string) => s.slice(0, i) + c + s.slice(i + 1);

describe('generateApiKey', () => {
  it('is svc_ followed by 38 base62 characters', () => {
    expect(API_KEY_PREFIX).toBe('svc_');
    for (let i = 0; i < 200; i++) {
      const key = generateApiKey();
      expect(key).toHaveLength(42);
      expect(key).toMatch(KEY_SHAPE);
    }
  });

  it('ends with the CRC32 checksum of everything before it (compatible with already-issued keys)', () => {
    for (let i = 0; i < 50; i++) {
      const key = generateApiKey();
      expect(key.slice(-6)).toBe(expectedChecksum(key.slice(0, -6)));
    }
  });

  it('produces 10,000 distinct keys whose random parts use the whole alphabet', () => {
    const keys = new Set<string>();
    const randomParts = new Set<string>();
    const seenChars = new Set<string>();
    for (let i = 0; i < 10_000; i++) {
      const key = generateApiKey();
      keys.add(key);
      const random = key.slice(4, 36);
      randomParts.add(random);
      for (const c of random) seenChars.add(c);
    }
    expect(keys.size).toBe(10_000);
    expect(randomParts.size).toBe(10_000);
    expect(seenChars.size).toBe(62);
  });
});

describe('parseApiKey', () => {
  it('accepts generated keys', () => {
    for (let i = 0; i < 500; i++) expect(parseApiKey(generateApiKey())).toBe(true);
  });

  it('accepts a hand-built key with a correct checksum', () => {
    expect(parseApiKey(withChecksum('svc_' + '0'.repeat(32)))).toBe(true);
    expect(parseApiKey(withChecksum('svc_' + 'zZ9'.repeat(10) + 'ab'))).toBe(true);
  });

  it('rejects every single-character change in the random part and in the checksum', () => {
    for (let k = 0; k < 3; k++) {
      const key = generateApiKey();
      let tried = 0;
      for (let pos = 4; pos < key.length; pos++) {
        for (const c of ALPHABET) {
          if (c === key[pos]) continue;
          const changed = replaceAt(key, pos, c);
          if (parseApiKey(changed)) throw new Error(`accepted ${changed} (position ${pos} of ${key})`);
          tried++;
        }
      }
      expect(tried).toBe(38 * 61);
    }
  });

  it('rejects a wrong prefix, even with a matching checksum', () => {
    const key = generateApiKey();
    const random = key.slice(4, 36);
    for (const prefix of ['SVC_', 'svc-', 'svk_', 'sv_', 'svcc_', '', 'xsvc_']) {
      expect(parseApiKey(prefix + key.slice(4))).toBe(false);
      expect(parseApiKey(withChecksum(prefix + random))).toBe(false);
    }
  });

  it('rejects a wrong length', () => {
    const key = generateApiKey();
    expect(parseApiKey(key.slice(0, -1))).toBe(false);
    expect(parseApiKey(key + 'a')).toBe(false);
    expect(parseApiKey(key + '\n')).toBe(false);
    expect(parseApiKey(' ' + key)).toBe(false);
    expect(parseApiKey('')).toBe(false);
    expect(parseApiKey('svc_')).toBe(false);
    // correct checksums over a 31- and a 33-character random part
    expect(parseApiKey(withChecksum('svc_' + 'a'.repeat(31)))).toBe(false);
    expect(parseApiKey(withChecksum('svc_' + 'a'.repeat(33)))).toBe(false);
  });

  it('rejects non-base62 characters, even with a matching checksum', () => {
    for (const bad of ['-', '_', '+', '/', '=', ' ', '.', 'é', 'ß', '٣', '\u0000']) {
      const body = 'svc_' + 'a'.repeat(15) + bad + 'b'.repeat(16);
      expect(parseApiKey(withChecksum(body))).toBe(false);
      expect(parseApiKey(replaceAt(generateApiKey(), 10, bad))).toBe(false);
    }
  });
});

describe('displayPrefix', () => {
  it('is the prefix plus the first 6 random characters', () => {
    const key = 'svc_AbC123xyzXYZ' + 'q'.repeat(20) + 'CHECK1';
    expect(displayPrefix(key)).toBe('svc_AbC123');
    const generated = generateApiKey();
    expect(displayPrefix(generated)).toBe(generated.slice(0, 10));
    expect(displayPrefix(generated)).toHaveLength(10);
  });
});
