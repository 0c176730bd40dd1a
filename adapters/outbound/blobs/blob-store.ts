import { randomUUID } from 'node:crypto';
import { mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';

/**
 * Uploaded originals, kept for re-processing. A directory by default; keys are opaque
 * (`<configId>/<uuid>`), never derived from client file names, so no path can escape the root.
 */
export interface BlobStore {
  put(prefix: string, bytes: Uint8Array): Promise<string>;
  get(key: string): Promise<Buffer>;
  delete(key: string): Promise<void>;
  deletePrefix(prefix: string): Promise<void>;
}

const SAFE_SEGMENT = /^[A-Za-z0-9-]{1,64}$/;

export function createDirectoryBlobStore(root: string): BlobStore {
  const pathOf = (key: string) => {
    const segments = key.split('/');
    if (segments.length !== 2 || !segments.every((s) => SAFE_SEGMENT.test(s))) throw new Error('invalid blob key');
    return join(root, ...segments);
  };
  return {
    async put(prefix, bytes) {
      const key = `${prefix}/${randomUUID()}`;
      const path = pathOf(key);
      await mkdir(dirname(path), { recursive: true });
      // Write then rename: a crash never leaves a half-written file under a key the database knows.
      const temp = `${path}.partial`;
      await writeFile(temp, bytes);
      await rename(temp, path);
      return key;
    },
    get: (key) => readFile(pathOf(key)),
    async delete(key) {
      await rm(pathOf(key), { force: true });
    },
    async deletePrefix(prefix) {
      if (!SAFE_SEGMENT.test(prefix)) throw new Error('invalid blob prefix');
      await rm(join(root, prefix), { recursive: true, force: true });
    },
  };
}
