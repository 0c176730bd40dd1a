import { scryptSync } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { DUMMY_HASH_PROMISE, hashPassword, verifyPassword } from '../../routers/auth/passwords.ts';

const HASH_SHAPE = /^scrypt\$32768\$8\$1\$([A-Za-z0-9_-]{22})\$([A-Za-z0-9_-]{43})$/;

describe('hashPassword', () => {
  it('has the format scrypt$32768$8$1$<16-byte salt>$<32-byte key> in base64url', async () => {
    const stored = await hashPassword('correct horse battery staple');
    expect(stored).toMatch(HASH_SHAPE);
    const [, , , , salt, key] = stored.split('$');
    expect(Buffer.from(salt!, 'base64url')).toHaveLength(16);
    expect(Buffer.from(key!, 'base64url')).toHaveLength(32);
  });

  it('is scrypt(N=32768, r=8, p=1) of the NFKC-normalised password', async () => {
    const stored = await hashPassword('ﬁne');
    const [, , , , salt, key] = stored.split('$');
    const expected = scryptSync('fine', Buffer.from(salt!, 'base64url'), 32, { N: 32768, r: 8, p: 1, maxmem: 64 * 1024 * 1024 });
    expect(key).toBe(expected.toString('base64url'));
  });

  it('uses a random salt: the same password hashes differently twice', async () => {
    const [a, b] = await Promise.all([hashPassword('same'), hashPassword('same')]);
    expect(a).not.toBe(b);
    expect(a.split('$')[4]).not.toBe(b.split('$')[4]);
    expect(a.split('$')[5]).not.toBe(b.split('$')[5]);
  });

  it('the dummy hash has the same shape', async () => {
    expect(await DUMMY_HASH_PROMISE).toMatch(HASH_SHAPE);
  });
});

describe('verifyPassword', () => {
  it('accepts the right password and refuses others', async () => {
    const stored = await hashPassword('Tr0ub4dor&3');
    expect(await verifyPassword('Tr0ub4dor&3', stored)).toBe(true);
    expect(await verifyPassword('tr0ub4dor&3', stored)).toBe(false);
    expect(await verifyPassword('Tr0ub4dor&', stored)).toBe(false);
    expect(await verifyPassword('Tr0ub4dor&3 ', stored)).toBe(false);
    expect(await verifyPassword('', stored)).toBe(false);
  });

  it('the empty password round-trips', async () => {
    const stored = await hashPassword('');
    expect(await verifyPassword('', stored)).toBe(true);
    expect(await verifyPassword(' ', stored)).toBe(false);
  });

  it('normalises Unicode with NFKC on both sides', async () => {
    const ligature = await hashPassword('ﬁle'); // U+FB01
    expect(await verifyPassword('file', ligature)).toBe(true);
    const plain = await hashPassword('file');
    expect(await verifyPassword('ﬁle', plain)).toBe(true);
    const composed = await hashPassword('caf\u00e9');
    expect(await verifyPassword('cafe\u0301', composed)).toBe(true);
    expect(await verifyPassword('cafe', composed)).toBe(false);
  });

  it('a hash of another password with the same salt does not verify', async () => {
    const stored = await hashPassword('one');
    const other = await hashPassword('two');
    const spliced = [...stored.split('$').slice(0, 5), other.split('$')[5]].join('$');
    expect(await verifyPassword('one', spliced)).toBe(false);
    expect(await verifyPassword('two', spliced)).toBe(false);
  });

  it('returns false (does not throw) for malformed stored strings', async () => {
    const good = await hashPassword('pw');
    const [, , , , salt, key] = good.split('$');
    const malformed = [
      '',
      'garbage',
      '$$$$$',
      `bcrypt$32768$8$1$${salt}$${key}`,
      `scrypt$32768$8$1$${salt}`,
      `scrypt$32768$8$1$${salt}$`,
      `scrypt$32768$8$$${salt}$${key}`,
      `scrypt$$8$1$${salt}$${key}`,
      `SCRYPT$32768$8$1$${salt}$${key}`,
    ];
    for (const stored of malformed) {
      await expect(verifyPassword('pw', stored), JSON.stringify(stored)).resolves.toBe(false);
    }
  });

  // Parameters other than the ones we write are refused, never passed to scrypt.
  it('returns false for non-numeric or invalid scrypt parameters', async () => {
    const good = await hashPassword('pw');
    const [, , , , salt, key] = good.split('$');
    await expect(verifyPassword('pw', `scrypt$abc$8$1$${salt}$${key}`)).resolves.toBe(false);
    await expect(verifyPassword('pw', `scrypt$1000$8$1$${salt}$${key}`)).resolves.toBe(false);
  });

  // A key part that decodes to 0 bytes (`****`) once made every password verify (empty == empty).
  it('refuses a stored hash whose key part decodes to nothing', async () => {
    const good = await hashPassword('pw');
    const [, , , , salt] = good.split('$');
    expect(await verifyPassword('not the password', `scrypt$32768$8$1$${salt}$****`)).toBe(false);
  });
});
