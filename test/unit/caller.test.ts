import { describe, expect, it } from 'vitest';
import { generateApiKey, parseApiKey } from '../../routers/api-keys/key-format.ts';
import { resolveCaller } from '../../routers/auth/caller.ts';
import type { AppDeps } from '../../routers/context.ts';
import { loadConfig } from '../../schema/config.ts';
import { createNotifiedCache } from '../../db/notified-cache.ts';
import { createSessionCache } from '../../routers/auth/session-cache.ts';

/** An object that records and refuses any use: a lookup through it fails the call. */
function tripwire(name: string, touched: string[]) {
  return new Proxy(
    {},
    {
      get(_target, prop) {
        touched.push(`${name}.${String(prop)}`);
        throw new Error(`${name} was touched (${String(prop)})`);
      },
      has(_target, prop) {
        touched.push(`${name} has ${String(prop)}`);
        throw new Error(`${name} was touched`);
      },
    },
  );
}

function makeDeps() {
  const touched: string[] = [];
  const recorded: string[] = [];
  const deps = {
    config: loadConfig({}),
    database: { db: tripwire('db', touched) },
    sessions: tripwire('sessions', touched),
    apiKeyCache: createNotifiedCache({ ttlMs: 0, maxEntries: 0 }),
    apiKeyListCache: createNotifiedCache({ ttlMs: 0, maxEntries: 0 }),
    sessionCache: createSessionCache({ ttlMs: 0, maxEntries: 0 }),
    securityEvents: { record: (kind: string) => recorded.push(kind) },
  } as unknown as AppDeps;
  return { deps, touched, recorded };
}

const badChecksumKey = (() => {
  const key = generateApiKey();
  const last = key.at(-1) === 'a' ? 'b' : 'a';
  return key.slice(0, -1) + last;
})();

describe('resolveCaller without touching storage', () => {
  it('no header -> anonymous, missing', async () => {
    const { deps, touched } = makeDeps();
    expect(await resolveCaller(deps, undefined)).toEqual({ kind: 'anonymous', reason: 'missing' });
    expect(await resolveCaller(deps, '')).toEqual({ kind: 'anonymous', reason: 'missing' });
    expect(touched).toEqual([]);
  });

  it('an API key with a bad checksum is refused without a database lookup', async () => {
    const fixed = 'svc_' + 'A'.repeat(38);
    expect(parseApiKey(fixed)).toBe(false);
    expect(parseApiKey(badChecksumKey)).toBe(false);
    for (const token of [fixed, badChecksumKey, 'svc_short', 'svc_' + 'A'.repeat(39)]) {
      const { deps, touched, recorded } = makeDeps();
      expect(await resolveCaller(deps, `Bearer ${token}`)).toEqual({ kind: 'anonymous', reason: 'invalid' });
      expect(touched).toEqual([]);
      expect(recorded).toEqual(['api_key_invalid']);
    }
  });

  it('a non-Bearer scheme or an empty bearer is invalid', async () => {
    for (const header of ['Basic x', 'Basic dXNlcjpwYXNz', 'Bearer', 'Bearer ', 'Token abcdefghijklmnopqrstuvwxyz', 'Bearer a b']) {
      const { deps, touched } = makeDeps();
      expect(await resolveCaller(deps, header)).toEqual({ kind: 'anonymous', reason: 'invalid' });
      expect(touched).toEqual([]);
    }
  });

  it('a bearer token shorter than 20 or longer than 256 characters is invalid without a session lookup', async () => {
    for (const token of ['x', 'abc', 'a'.repeat(19), 'a'.repeat(257)]) {
      const { deps, touched } = makeDeps();
      expect(await resolveCaller(deps, `Bearer ${token}`)).toEqual({ kind: 'anonymous', reason: 'invalid' });
      expect(touched).toEqual([]);
    }
  });

  // Controls: the tripwires do fire when the code really looks something up, so the tests above are meaningful.
  it('control: a well-formed API key does reach the database', async () => {
    const { deps, touched } = makeDeps();
    await expect(resolveCaller(deps, `Bearer ${generateApiKey()}`)).rejects.toThrow(/db was touched/);
    expect(touched.length).toBeGreaterThan(0);
  });

  it('control: a 20-character session token does reach the session store', async () => {
    const { deps, touched } = makeDeps();
    await expect(resolveCaller(deps, `bearer ${'a'.repeat(20)}`)).rejects.toThrow(/sessions was touched/);
    expect(touched).toEqual(['sessions.validateSession']);
  });
});
