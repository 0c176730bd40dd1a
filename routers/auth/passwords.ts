import { randomBytes, scrypt as scryptCallback, timingSafeEqual, type ScryptOptions } from 'node:crypto';
import pLimit from 'p-limit';

/**
 * Hashes at once, in this process. Each holds one of libuv's four threads, which file, DNS and zlib work share,
 * for about 90 ms: unbounded, sign-ins from many addresses at once (each address within its rate limit) would take
 * all four and stall uploads and outbound calls behind them. Beyond this, hashes wait their turn.
 */
const MAX_CONCURRENT_HASHES = 2;
const hashSlots = pLimit(MAX_CONCURRENT_HASHES);

const scrypt = (password: string, salt: Buffer, keyLength: number, options: ScryptOptions) =>
  hashSlots(
    () => new Promise<Buffer>((resolve, reject) => scryptCallback(password, salt, keyLength, options, (err, key) => (err ? reject(err) : resolve(key)))),
  );

/** Hashes running now (at most MAX_CONCURRENT_HASHES) and waiting for a turn. */
export const passwordHashLoad = () => ({ running: hashSlots.activeCount, waiting: hashSlots.pendingCount });

// scrypt is memory-hard and built into Node (no native addon to build). N=2^15, r=8 costs 32 MiB per hash.
const PARAMS = { N: 2 ** 15, r: 8, p: 1 } as const;
const KEY_LENGTH = 32;
const MAX_MEM = 64 * 1024 * 1024;

export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(16);
  const key = await scrypt(password.normalize('NFKC'), salt, KEY_LENGTH, { ...PARAMS, maxmem: MAX_MEM });
  return ['scrypt', PARAMS.N, PARAMS.r, PARAMS.p, salt.toString('base64url'), key.toString('base64url')].join('$');
}

/**
 * False for a wrong password and for any stored value that is not exactly what hashPassword writes: a
 * stored key of the wrong length (e.g. empty) must never make every password match.
 */
export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const parts = stored.split('$');
  if (parts.length !== 6) return false;
  const [scheme, n, r, p, salt, expected] = parts as [string, string, string, string, string, string];
  if (scheme !== 'scrypt' || n !== String(PARAMS.N) || r !== String(PARAMS.r) || p !== String(PARAMS.p)) return false;
  const expectedKey = Buffer.from(expected, 'base64url');
  const saltBytes = Buffer.from(salt, 'base64url');
  if (expectedKey.length !== KEY_LENGTH || saltBytes.length < 16) return false;
  try {
    const key = await scrypt(password.normalize('NFKC'), saltBytes, KEY_LENGTH, { ...PARAMS, maxmem: MAX_MEM });
    return timingSafeEqual(key, expectedKey);
  } catch {
    return false;
  }
}

/** A hash of a random password: verifying against it costs the same as a real one (no user-enumeration timing). */
export const DUMMY_HASH_PROMISE = hashPassword(randomBytes(16).toString('hex'));
