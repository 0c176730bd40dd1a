import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createDirectoryBlobStore } from './blob-store.ts';

const root = mkdtempSync(join(tmpdir(), 'cis-blobs-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('directory blob store', () => {
  const store = createDirectoryBlobStore(root);
  const prefix = '0b7c4c1e-58a4-4b8e-9d55-2f1f8f4a7c10';

  it('stores bytes under a new key and gives them back; nothing else is left in the folder', async () => {
    const key = await store.put(prefix, new TextEncoder().encode('first'));
    const other = await store.put(prefix, new TextEncoder().encode('second'));
    expect(key).not.toBe(other);
    expect((await store.get(key)).toString()).toBe('first');
    expect((await store.get(other)).toString()).toBe('second');
    expect(readdirSync(join(root, prefix)).sort()).toEqual([key, other].map((k) => k.split('/')[1]).sort());
    await store.delete(key);
    await expect(store.get(key)).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('writes again after its folder was removed, by deletePrefix or behind its back', async () => {
    await store.put(prefix, new Uint8Array([1]));
    await store.deletePrefix(prefix);
    const afterDelete = await store.put(prefix, new Uint8Array([2]));
    expect([...(await store.get(afterDelete))]).toEqual([2]);
    rmSync(join(root, prefix), { recursive: true, force: true });
    const afterRemoval = await store.put(prefix, new Uint8Array([3]));
    expect([...(await store.get(afterRemoval))]).toEqual([3]);
  });

  it('makes its root and the folders above it when none exists yet', async () => {
    const nested = createDirectoryBlobStore(join(root, 'not', 'made', 'yet'));
    const key = await nested.put(prefix, new Uint8Array([4, 5]));
    expect([...(await nested.get(key))]).toEqual([4, 5]);
    expect(readdirSync(join(root, 'not', 'made', 'yet', prefix))).toEqual([key.split('/')[1]]);
  });

  it('concurrent puts of a larger body each get a file of their own holding all of it', async () => {
    const bytes = new Uint8Array(256 * 1024).fill(7);
    const keys = await Promise.all(Array.from({ length: 16 }, () => store.put(prefix, bytes)));
    expect(new Set(keys).size).toBe(16);
    for (const key of keys) expect((await store.get(key)).equals(Buffer.from(bytes))).toBe(true);
  });

  it('refuses keys and prefixes that could leave its root', async () => {
    await expect(store.put('../escape', new Uint8Array([1]))).rejects.toThrow(/invalid blob key/);
    await expect(store.get('a/../../etc/passwd')).rejects.toThrow(/invalid blob key/);
    await expect(store.deletePrefix('..')).rejects.toThrow(/invalid blob prefix/);
  });
});
