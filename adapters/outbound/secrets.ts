import { createCipheriv, createDecipheriv, createHash, createHmac, hkdfSync, randomBytes, timingSafeEqual } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * Symmetric encryption for secrets we must be able to use later (upstream API keys, webhook secrets).
 * AES-256-GCM, random 96-bit nonce per value; stored as `v1.<nonce>.<tag>.<ciphertext>` in base64url.
 */
const TAG_LENGTH = 16;

/** SHA-256 in hex: how bearer tokens, API keys and single-use tokens are stored (a database leak yields none of them). */
export const sha256Hex = (value: string) => createHash('sha256').update(value).digest('hex');

/**
 * Whether a presented secret is the expected one, in constant time. Digests have equal lengths whatever was sent,
 * so the comparison can neither throw nor leak the length; an empty secret never matches.
 */
export function sameSecret(given: string, expected: string): boolean {
  if (given === '' || expected === '') return false;
  const digest = (value: string) => createHash('sha256').update(value).digest();
  return timingSafeEqual(digest(given), digest(expected));
}

export interface SecretBox {
  seal(plaintext: string): string;
  open(sealed: string): string;
  /** HMAC-SHA256 of `data` (base64url) under a key derived for `purpose`: one purpose's tags never verify as another's. */
  sign(purpose: string, data: string): string;
  /** Whether `tag` is sign(purpose, data), compared in constant time. */
  verify(purpose: string, data: string, tag: string): boolean;
}

export function createSecretBox(key: Buffer): SecretBox {
  if (key.length !== 32) throw new Error('encryption key must be 32 bytes');
  const macKeys = new Map<string, Buffer>();
  const macKey = (purpose: string) => {
    let derived = macKeys.get(purpose);
    if (!derived) {
      derived = Buffer.from(hkdfSync('sha256', key, Buffer.alloc(0), `mac:${purpose}`, 32));
      macKeys.set(purpose, derived);
    }
    return derived;
  };
  const mac = (purpose: string, data: string) => createHmac('sha256', macKey(purpose)).update(data).digest();
  return {
    sign: (purpose, data) => mac(purpose, data).toString('base64url'),
    verify(purpose, data, tag) {
      const given = Buffer.from(tag, 'base64url');
      const expected = mac(purpose, data);
      return given.length === expected.length && timingSafeEqual(given, expected);
    },
    seal(plaintext) {
      const nonce = randomBytes(12);
      const cipher = createCipheriv('aes-256-gcm', key, nonce);
      const body = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
      return ['v1', nonce, cipher.getAuthTag(), body].map((p) => (typeof p === 'string' ? p : p.toString('base64url'))).join('.');
    },
    open(sealed) {
      const parts = sealed.split('.');
      const [version, nonce, tag, body] = parts;
      if (parts.length !== 4 || version !== 'v1' || !nonce || !tag || body === undefined) throw new Error('unrecognised sealed secret');
      const tagBytes = Buffer.from(tag, 'base64url');
      // A full 16-byte tag only: GCM accepts truncated tags, which would make forgeries far cheaper.
      if (tagBytes.length !== TAG_LENGTH) throw new Error('unrecognised sealed secret');
      const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(nonce, 'base64url'), { authTagLength: TAG_LENGTH });
      decipher.setAuthTag(tagBytes);
      return Buffer.concat([decipher.update(Buffer.from(body, 'base64url')), decipher.final()]).toString('utf8');
    },
  };
}

/** ENCRYPTION_KEY when given; otherwise a key generated once into DATA_DIR (mode 0600) and reused. */
export function loadEncryptionKey(configured: string | undefined, dataDir: string): Buffer {
  if (configured) return Buffer.from(configured, 'base64');
  const file = join(dataDir, 'encryption.key');
  if (existsSync(file)) return Buffer.from(readFileSync(file, 'utf8').trim(), 'base64');
  mkdirSync(dataDir, { recursive: true });
  const key = randomBytes(32);
  writeFileSync(file, key.toString('base64'), { mode: 0o600, flag: 'wx' });
  return key;
}
