import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createSecretBox, loadEncryptionKey } from '../../adapters/outbound/secrets.ts';

const B64URL = /^[A-Za-z0-9_-]*$/;

function parts(sealed: string) {
  const [version, nonce, tag, body] = sealed.split('.');
  return { version: version!, nonce: Buffer.from(nonce!, 'base64url'), tag: Buffer.from(tag!, 'base64url'), body: Buffer.from(body!, 'base64url') };
}
const join4 = (p: { version: string; nonce: Buffer; tag: Buffer; body: Buffer }) =>
  [p.version, p.nonce.toString('base64url'), p.tag.toString('base64url'), p.body.toString('base64url')].join('.');
function flipped(buf: Buffer, index: number): Buffer {
  const copy = Buffer.from(buf);
  copy[index] = copy[index]! ^ 0x01;
  return copy;
}

describe('createSecretBox', () => {
  const box = createSecretBox(randomBytes(32));

  it('round-trips unicode, the empty string and 10 KB', () => {
    const samples = ['sk-live-1234567890', 'héllo wörld ✓ 你好 🚀 \u0000 end', '', 'x'.repeat(10 * 1024), randomBytes(7000).toString('base64')];
    for (const plaintext of samples) {
      const sealed = box.seal(plaintext);
      expect(box.open(sealed)).toBe(plaintext);
    }
  });

  it('seals as v1.<12-byte nonce>.<16-byte tag>.<ciphertext> in base64url', () => {
    const plaintext = 'héllo';
    const sealed = box.seal(plaintext);
    const segments = sealed.split('.');
    expect(segments).toHaveLength(4);
    expect(segments[0]).toBe('v1');
    for (const s of segments.slice(1)) expect(s).toMatch(B64URL);
    const p = parts(sealed);
    expect(p.nonce).toHaveLength(12);
    expect(p.tag).toHaveLength(16);
    expect(p.body).toHaveLength(Buffer.byteLength(plaintext, 'utf8'));
    expect(p.body.equals(Buffer.from(plaintext, 'utf8'))).toBe(false);
    expect(box.seal('')).toMatch(/^v1\.[A-Za-z0-9_-]{16}\.[A-Za-z0-9_-]{22}\.$/);
  });

  it('uses a random nonce: the same plaintext seals differently', () => {
    const a = box.seal('same secret');
    const b = box.seal('same secret');
    expect(a).not.toBe(b);
    expect(parts(a).nonce.equals(parts(b).nonce)).toBe(false);
    expect(parts(a).body.equals(parts(b).body)).toBe(false);
    const nonces = new Set(Array.from({ length: 1000 }, () => parts(box.seal('x')).nonce.toString('hex')));
    expect(nonces.size).toBe(1000);
  });

  it('refuses any tampered byte in the nonce, the tag or the body', () => {
    const sealed = box.seal('the upstream api key');
    const p = parts(sealed);
    expect(box.open(join4(p))).toBe('the upstream api key');
    for (const field of ['nonce', 'tag', 'body'] as const) {
      for (let i = 0; i < p[field].length; i++) {
        const tampered = join4({ ...p, [field]: flipped(p[field], i) });
        expect(() => box.open(tampered), `${field}[${i}]`).toThrow();
      }
    }
  });

  it('refuses a truncated or extended body and a swapped body', () => {
    const p = parts(box.seal('abcdefgh'));
    const other = parts(box.seal('ABCDEFGH'));
    expect(() => box.open(join4({ ...p, body: p.body.subarray(0, -1) }))).toThrow();
    expect(() => box.open(join4({ ...p, body: Buffer.concat([p.body, Buffer.from([0])]) }))).toThrow();
    expect(() => box.open(join4({ ...p, body: other.body }))).toThrow();
    expect(() => box.open(join4({ ...p, tag: other.tag }))).toThrow();
  });

  // GCM accepts truncated tags unless told otherwise; a 4-byte tag would make forgery a 2^32 job.
  it('refuses a truncated authentication tag', () => {
    const p = parts(box.seal('secret'));
    expect(() => box.open(join4({ ...p, tag: p.tag.subarray(0, 4) }))).toThrow();
  });

  it('refuses a different key', () => {
    const sealed = box.seal('secret');
    expect(() => createSecretBox(randomBytes(32)).open(sealed)).toThrow();
  });

  it('a second box with the same key opens it', () => {
    const key = randomBytes(32);
    expect(createSecretBox(Buffer.from(key)).open(createSecretBox(key).seal('shared'))).toBe('shared');
  });

  it('refuses an unknown version or a wrong shape', () => {
    const sealed = box.seal('secret');
    const rest = sealed.slice(sealed.indexOf('.'));
    for (const bad of ['v2' + rest, 'V1' + rest, rest, 'v0' + rest, 'v1', 'v1..', '', 'not sealed']) {
      expect(() => box.open(bad), bad).toThrow();
    }
    expect(() => box.open('v2' + rest)).toThrow('unrecognised sealed secret');
  });

  it('requires a 32-byte key', () => {
    for (const length of [0, 16, 24, 31, 33, 64]) {
      expect(() => createSecretBox(randomBytes(length)), String(length)).toThrow('encryption key must be 32 bytes');
    }
    expect(() => createSecretBox(randomBytes(32))).not.toThrow();
  });
});

describe('loadEncryptionKey', () => {
  const dirs: string[] = [];
  const tempDir = () => {
    const dir = mkdtempSync(join(tmpdir(), 'secrets-test-'));
    dirs.push(dir);
    return dir;
  };
  afterEach(() => {
    for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
  });

  it('uses the configured base64 key and writes nothing', () => {
    const dir = tempDir();
    const key = randomBytes(32);
    const loaded = loadEncryptionKey(key.toString('base64'), dir);
    expect(loaded.equals(key)).toBe(true);
    expect(existsSync(join(dir, 'encryption.key'))).toBe(false);
  });

  it('generates a 32-byte key into DATA_DIR/encryption.key with mode 0600, creating the directory', () => {
    const dataDir = join(tempDir(), 'nested', 'data');
    const key = loadEncryptionKey(undefined, dataDir);
    expect(key).toHaveLength(32);
    const file = join(dataDir, 'encryption.key');
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(Buffer.from(readFileSync(file, 'utf8').trim(), 'base64').equals(key)).toBe(true);
    expect(() => createSecretBox(key)).not.toThrow();
  });

  it('reuses the generated key on the next call', () => {
    const dir = tempDir();
    const first = loadEncryptionKey(undefined, dir);
    const second = loadEncryptionKey(undefined, dir);
    expect(second.equals(first)).toBe(true);
    // an empty ENCRYPTION_KEY counts as unset
    expect(loadEncryptionKey('', dir).equals(first)).toBe(true);
    const sealed = createSecretBox(first).seal('survives restart');
    expect(createSecretBox(loadEncryptionKey(undefined, dir)).open(sealed)).toBe('survives restart');
  });

  it('a configured key wins over a generated file', () => {
    const dir = tempDir();
    const generated = loadEncryptionKey(undefined, dir);
    const configured = randomBytes(32);
    const loaded = loadEncryptionKey(configured.toString('base64'), dir);
    expect(loaded.equals(configured)).toBe(true);
    expect(loaded.equals(generated)).toBe(false);
  });

  it('two different data directories get different keys', () => {
    expect(loadEncryptionKey(undefined, tempDir()).equals(loadEncryptionKey(undefined, tempDir()))).toBe(false);
  });
});
