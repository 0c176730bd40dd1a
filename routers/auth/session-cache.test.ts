import { describe, expect, it } from 'vitest';
import { createSessionCache, type ValidSession } from './session-cache.ts';

const HOUR = 3_600_000;

const session = (id: string, ownerId: string, expiresAt = 24 * HOUR): ValidSession => ({
  sessionId: id,
  expiresAt,
  owner: { id: ownerId, email: `${ownerId}@example.com`, name: null, plan: 'free', role: 'owner' },
});

function setup(options: { ttlMs?: number; maxEntries?: number } = {}) {
  let clock = 0;
  const cache = createSessionCache({ ttlMs: options.ttlMs ?? 1_000, maxEntries: options.maxEntries ?? 3, now: () => clock });
  const loads: string[] = [];
  const rows = new Map<string, ValidSession | undefined>([
    ['s1', session('s1', 'alice')],
    ['s2', session('s2', 'alice')],
    ['s3', session('s3', 'bob')],
    ['s4', session('s4', 'carol')],
  ]);
  const lookup = (id: string) =>
    cache.lookup(id, async () => {
      loads.push(id);
      return rows.get(id);
    });
  return { cache, loads, rows, lookup, tick: (ms: number) => (clock += ms) };
}

describe('session cache', () => {
  it('serves nothing from memory until it is live, then answers repeat lookups without loading', async () => {
    const { cache, loads, lookup } = setup();
    await lookup('s1');
    await lookup('s1');
    expect(loads).toEqual(['s1', 's1']);
    cache.setLive(true);
    await lookup('s1');
    expect((await lookup('s1'))?.owner.id).toBe('alice');
    expect(loads).toEqual(['s1', 's1', 's1']);
    expect(cache.size).toBe(1);
  });

  it('never stores an unknown session: made-up tokens cannot fill it', async () => {
    const { cache, loads, lookup } = setup();
    cache.setLive(true);
    expect(await lookup('nope')).toBeUndefined();
    expect(await lookup('nope')).toBeUndefined();
    expect(loads).toEqual(['nope', 'nope']);
    expect(cache.size).toBe(0);
  });

  it("forgetting an owner drops that owner's sessions only; forgetting a session drops that one", async () => {
    const { cache, loads, lookup } = setup();
    cache.setLive(true);
    for (const id of ['s1', 's2', 's3']) await lookup(id);
    cache.forgetOwner('alice');
    expect(cache.size).toBe(1);
    for (const id of ['s1', 's2', 's3']) await lookup(id);
    expect(loads).toEqual(['s1', 's2', 's3', 's1', 's2']);
    cache.forgetSession('s1');
    await lookup('s1');
    await lookup('s2');
    expect(loads).toEqual(['s1', 's2', 's3', 's1', 's2', 's1']);
    cache.invalidate();
    expect(cache.size).toBe(0);
  });

  it('an entry lives ttlMs at most, and never past the session expiry', async () => {
    const { cache, loads, rows, lookup, tick } = setup({ ttlMs: 1_000 });
    cache.setLive(true);
    rows.set('s1', session('s1', 'alice', 500));
    await lookup('s1');
    tick(499);
    await lookup('s1');
    expect(loads).toEqual(['s1']);
    tick(1);
    rows.set('s1', undefined);
    expect(await lookup('s1')).toBeUndefined();
    await lookup('s2');
    tick(999);
    await lookup('s2');
    tick(1);
    await lookup('s2');
    expect(loads).toEqual(['s1', 's1', 's2', 's2']);
  });

  it("a lookup that raced an owner's change (whoever's), its own session's or everything's does not store its answer", async () => {
    const { cache, loads } = setup();
    cache.setLive(true);
    for (const invalidate of [() => cache.forgetOwner('someone-else'), () => cache.forgetSession('s1'), () => cache.invalidate()]) {
      let release!: () => void;
      const gate = new Promise<void>((resolve) => (release = resolve));
      const racing = cache.lookup('s1', async () => {
        loads.push('s1');
        await gate;
        return session('s1', 'alice');
      });
      invalidate();
      release();
      await racing;
      expect(cache.size).toBe(0);
    }
    expect(loads).toEqual(['s1', 's1', 's1']);
    // Another session's change cannot make this one's answer stale: it is stored.
    const racing = cache.lookup('s1', async () => {
      loads.push('s1');
      cache.forgetSession('s2');
      return session('s1', 'alice');
    });
    await racing;
    expect(cache.size).toBe(1);
  });

  it('losing the notifications empties and suspends it until they are back', async () => {
    const { cache, loads, lookup } = setup();
    cache.setLive(true);
    await lookup('s1');
    cache.setLive(false);
    expect(cache.size).toBe(0);
    await lookup('s1');
    expect(cache.size).toBe(0);
    cache.setLive(true);
    await lookup('s1');
    await lookup('s1');
    expect(loads).toEqual(['s1', 's1', 's1']);
  });

  it('keeps at most maxEntries, dropping the least recently used, and its owner index follows', async () => {
    const { cache, loads, lookup } = setup({ maxEntries: 3 });
    cache.setLive(true);
    for (const id of ['s1', 's2', 's3']) await lookup(id);
    await lookup('s1'); // s2 is now the least recently used
    await lookup('s4');
    expect(cache.size).toBe(3);
    await lookup('s1');
    await lookup('s3');
    await lookup('s4');
    expect(loads).toEqual(['s1', 's2', 's3', 's4']);
    await lookup('s2');
    expect(loads.at(-1)).toBe('s2');
    // Evicted entries left the owner index: forgetting alice leaves bob and carol's sessions.
    cache.forgetOwner('alice');
    await lookup('s3');
    await lookup('s4');
    expect(loads).toEqual(['s1', 's2', 's3', 's4', 's2']);
  });

  it('a TTL of 0 turns it off', async () => {
    const { cache, loads, lookup } = setup({ ttlMs: 0 });
    cache.setLive(true);
    await lookup('s1');
    await lookup('s1');
    expect(loads).toEqual(['s1', 's1']);
  });
});
