import { describe, expect, it } from 'vitest';
import { createNotifiedCache, type NotifiedCacheOptions } from './notified-cache.ts';

interface Row {
  id: string;
  size: number;
}
const key = (id: string, size = 1): Row => ({ id, size });

function setup(ttlMs = 1_000, maxEntries = 3, storable?: NotifiedCacheOptions<Row>['storable']) {
  let clock = 0;
  const cache = createNotifiedCache<Row>({ ttlMs, maxEntries, storable, now: () => clock });
  const loads: string[] = [];
  const rows = new Map<string, Row | undefined>([
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

describe('notified cache', () => {
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

  it('never stores an unknown key (undefined), so made-up keys cannot fill it and always reach the database', async () => {
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
    const slow = cache.lookup('h1', () => new Promise<Row>((resolve) => (release = () => resolve(key('stale')))));
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

  it('forgetting one key reloads only that key, and a load in flight across it is not stored', async () => {
    const { cache, loads, rows, lookup } = setup();
    cache.setLive(true);
    await lookup('h1');
    await lookup('h2');
    rows.set('h1', key('k1-renamed'));
    cache.forget('h1');
    expect((await lookup('h1'))?.id).toBe('k1-renamed');
    expect((await lookup('h2'))?.id).toBe('k2');
    expect(loads).toEqual(['h1', 'h2', 'h1']);

    let release!: () => void;
    const slow = cache.lookup('h3', () => new Promise<Row>((resolve) => (release = () => resolve(key('stale')))));
    cache.forget('h3');
    release();
    expect((await slow)?.id).toBe('stale');
    expect((await lookup('h3'))?.id).toBe('k3');
  });

  it("a load in flight is still stored when only other keys are forgotten meanwhile, and not after the key's own forget", async () => {
    const { cache, loads, lookup } = setup(1_000, 10);
    cache.setLive(true);
    const gates: Array<() => void> = [];
    const slowLoad = (id: string) => cache.lookup(id, () => new Promise<Row>((resolve) => gates.push(() => resolve(key(`${id}-loaded`)))));
    const a = slowLoad('h1');
    const b = slowLoad('h2');
    cache.forget('h2');
    cache.forget('h3');
    for (const open of gates) open();
    await Promise.all([a, b]);
    expect((await lookup('h1'))?.id).toBe('h1-loaded'); // stored: only other keys were forgotten
    expect((await lookup('h2'))?.id).toBe('k2'); // not stored: forgotten while loading
    expect(loads).toEqual(['h2']);
    // With nothing in flight, a forget long before a load does not keep that load from being stored.
    cache.forget('h4');
    await lookup('h4');
    await lookup('h4');
    expect(loads).toEqual(['h2', 'h4']);
  });

  it('a load that fails stores nothing and leaves the cache working', async () => {
    const { cache, loads, lookup } = setup();
    cache.setLive(true);
    await expect(cache.lookup('h1', async () => Promise.reject(new Error('database down')))).rejects.toThrow('database down');
    await lookup('h1');
    await lookup('h1');
    expect(loads).toEqual(['h1']);
  });

  it('stores only what storable accepts; the rest is loaded every time', async () => {
    const { cache, loads, rows, lookup } = setup(1_000, 3, (row) => row.size <= 10);
    cache.setLive(true);
    rows.set('h1', key('big', 11));
    await lookup('h1');
    await lookup('h1');
    await lookup('h2');
    await lookup('h2');
    expect(loads).toEqual(['h1', 'h1', 'h2']);
  });

  it('evicts the least recently used, not the oldest stored', async () => {
    const { cache, loads, lookup } = setup(1_000, 3);
    cache.setLive(true);
    await lookup('h1');
    await lookup('h2');
    await lookup('h3');
    await lookup('h1'); // h2 is now the least recently used
    await lookup('h4');
    expect(cache.size).toBe(3);
    loads.length = 0;
    await lookup('h1');
    await lookup('h3');
    await lookup('h2');
    expect(loads).toEqual(['h2']);
  });

  it('forgetWhere drops the matching entries only and keeps any load in flight from being stored', async () => {
    const { cache, loads, lookup } = setup(1_000, 10);
    cache.setLive(true);
    for (const id of ['h1', 'h2', 'h3']) await lookup(id);
    let release!: () => void;
    const slow = cache.lookup('h4', () => new Promise<Row>((resolve) => (release = () => resolve(key('k4')))));
    cache.forgetWhere((row) => row.id === 'k2');
    release();
    await slow;
    expect(cache.size).toBe(2);
    for (const id of ['h1', 'h2', 'h3', 'h4']) await lookup(id);
    expect(loads).toEqual(['h1', 'h2', 'h3', 'h2', 'h4']);
  });

  it('does not serve an entry that is no longer fresh', async () => {
    let clock = 0;
    const cache = createNotifiedCache<Row>({ ttlMs: 10_000, maxEntries: 10, now: () => clock, fresh: (row, now) => now < row.size });
    cache.setLive(true);
    let loadsCount = 0;
    const load = async () => {
      loadsCount++;
      return key('k1', 100);
    };
    await cache.lookup('h1', load);
    clock = 99;
    await cache.lookup('h1', load);
    expect(loadsCount).toBe(1);
    clock = 100;
    await cache.lookup('h1', load);
    expect(loadsCount).toBe(2);
  });
});
