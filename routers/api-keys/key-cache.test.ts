import { describe, expect, it } from 'vitest';
import { createApiKeyCache } from './key-cache.ts';
import type { ActiveKey } from './repository.ts';

const key = (id: string): ActiveKey => ({
  id,
  owner_id: 'o',
  chat_interface_id: 'c',
  last_used_at: null,
  slug: 's',
  config_id: null,
  endpoint_url: null,
  endpoint_type: null,
  endpoint_api_key_enc: null,
});

function setup(ttlMs = 1_000, maxEntries = 3) {
  let clock = 0;
  const cache = createApiKeyCache({ ttlMs, maxEntries, now: () => clock });
  const loads: string[] = [];
  const rows = new Map<string, ActiveKey | undefined>([
    ['h1', key('k1')],
    ['h2', key('k2')],
    ['h3', key('k3')],
    ['h4', key('k4')],
  ]);
  const lookup = (hash: string) =>
    cache.lookup(hash, async () => {
      loads.push(hash);
      return rows.get(hash);
    });
  return { cache, loads, rows, lookup, tick: (ms: number) => (clock += ms) };
}

describe('API-key cache', () => {
  it('serves nothing from memory until it is live, then answers repeat lookups without loading', async () => {
    const { cache, loads, lookup } = setup();
    await lookup('h1');
    await lookup('h1');
    expect(loads).toEqual(['h1', 'h1']);
    cache.setLive(true);
    expect((await lookup('h1'))?.id).toBe('k1');
    expect((await lookup('h1'))?.id).toBe('k1');
    expect(loads).toEqual(['h1', 'h1', 'h1']);
  });

  it('never stores an unknown key, so made-up keys cannot fill it and always reach the database', async () => {
    const { cache, loads, lookup } = setup();
    cache.setLive(true);
    expect(await lookup('nope')).toBeUndefined();
    expect(await lookup('nope')).toBeUndefined();
    expect(loads).toEqual(['nope', 'nope']);
  });

  it('forgets everything on invalidate and when it stops being live', async () => {
    const { cache, loads, rows, lookup } = setup();
    cache.setLive(true);
    await lookup('h1');
    rows.set('h1', undefined); // deactivated
    cache.invalidate();
    expect(await lookup('h1')).toBeUndefined();
    rows.set('h1', key('k1'));
    await lookup('h1');
    cache.setLive(false);
    await lookup('h1');
    await lookup('h1');
    expect(loads).toEqual(['h1', 'h1', 'h1', 'h1', 'h1']);
  });

  it('does not keep an answer loaded across an invalidation (it may predate the change)', async () => {
    const { cache, loads } = setup();
    cache.setLive(true);
    let release!: () => void;
    const slow = cache.lookup('h1', () => new Promise<ActiveKey>((resolve) => (release = () => resolve(key('stale')))));
    cache.invalidate();
    release();
    expect((await slow)?.id).toBe('stale');
    const fresh = await cache.lookup('h1', async () => {
      loads.push('h1');
      return key('fresh');
    });
    expect(fresh?.id).toBe('fresh');
    expect(loads).toEqual(['h1']);
  });

  it('expires entries after the TTL and evicts the oldest beyond the size bound', async () => {
    const { cache, loads, lookup, tick } = setup(1_000, 3);
    cache.setLive(true);
    await lookup('h1');
    tick(999);
    await lookup('h1');
    tick(1);
    await lookup('h1');
    expect(loads).toEqual(['h1', 'h1']);
    await lookup('h2');
    await lookup('h3');
    await lookup('h4'); // h1 is the oldest of four
    loads.length = 0;
    await lookup('h4');
    await lookup('h2');
    await lookup('h1');
    expect(loads).toEqual(['h1']);
  });

  it('is off with a TTL of 0', async () => {
    const { cache, loads, lookup } = setup(0);
    cache.setLive(true);
    await lookup('h1');
    await lookup('h1');
    expect(loads).toEqual(['h1', 'h1']);
  });
});
