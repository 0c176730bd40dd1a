import { randomBytes } from 'node:crypto';
import { crc32 } from 'node:zlib';

const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const RANDOM_LENGTH = 32;
const CHECKSUM_LENGTH = 6;
export const API_KEY_PREFIX = 'svc_';
const KEY_PATTERN = new RegExp(`^${API_KEY_PREFIX}[0-9A-Za-z]{${RANDOM_LENGTH + CHECKSUM_LENGTH}}$`);

function toBase62(value: number, width: number): string {
  let out = '';
  let rest = value;
  for (let i = 0; i < width; i++) {
    out = ALPHABET[rest % 62] + out;
    rest = Math.floor(rest / 62);
  }
  return out;
}

function randomBase62(length: number): string {
  // Rejection sampling keeps the distribution uniform (256 is not a multiple of 62).
  let out = '';
  while (out.length < length) {
    for (const byte of randomBytes(length * 2)) {
      if (byte < 248 && out.length < length) out += ALPHABET[byte % 62];
    }
  }
  return out;
}

const checksumOf = (body: string) => toBase62(crc32(body), CHECKSUM_LENGTH);

/** `svc_` + 32 random base62 characters (~190 bits) + a 6-character CRC32 checksum of everything before it. */
export function generateApiKey(): string {
  const body = API_KEY_PREFIX + randomBase62(RANDOM_LENGTH);
  return body + checksumOf(body);
}

/** True when the key is well-formed and its checksum matches: typos and random guesses never reach the database. */
export function parseApiKey(key: string): boolean {
  if (!KEY_PATTERN.test(key)) return false;
  const body = key.slice(0, -CHECKSUM_LENGTH);
  return checksumOf(body) === key.slice(-CHECKSUM_LENGTH);
}

export const displayPrefix = (key: string) => key.slice(0, API_KEY_PREFIX.length + 6);
