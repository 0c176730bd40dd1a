import { describe, expect, it } from 'vitest';
import { createReadAhead } from './ingest.ts';

const MiB = 1024 * 1024;

/** Items whose work is started and settled by hand. */
function harness(sizes: number[]) {
  const started: number[] = [];
  const settle = new Map<number, (value: string | Error) => void>();
  const items = sizes.map((size_bytes, i) => ({ i, doc: { size_bytes } }));
  const ahead = createReadAhead(items, (item) => {
    started.push(item.i);
    return new Promise<string>((resolve, reject) => settle.set(item.i, (v) => (v instanceof Error ? reject(v) : resolve(v))));
  });
  return { ahead, started, settle: (i: number, v: string | Error) => settle.get(i)!(v) };
}

const tick = () => new Promise((resolve) => setImmediate(resolve));

describe('createReadAhead', () => {
  it('starts no more than its byte budget allows, but always the next one, and hands results over in order', async () => {
    const { ahead, started, settle } = harness([6 * MiB, 3 * MiB, 20 * MiB, 1]);
    expect(started).toEqual([0]); // 6 + 3 MiB is over the 8 MiB budget
    expect(ahead.waiting()).toBe(true);
    settle(0, 'a');
    await tick();
    expect(ahead.waiting()).toBe(false);
    expect((await ahead.next())?.prepared).toBe('a');
    expect(started).toEqual([0, 1]); // 3 MiB fits; the 20 MiB file waits for it
    settle(1, 'b');
    expect((await ahead.next())?.prepared).toBe('b');
    expect(started).toEqual([0, 1, 2]); // alone, a file over the budget still starts
    settle(2, 'c');
    expect((await ahead.next())?.prepared).toBe('c');
    settle(3, 'd');
    expect((await ahead.next())?.prepared).toBe('d');
    expect(await ahead.next()).toBeUndefined();
  });

  it('keeps at most eight small documents in flight and gives a failure back as a value', async () => {
    const { ahead, started, settle } = harness(Array.from({ length: 12 }, () => 1_000));
    expect(started).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    settle(1, 'second');
    settle(0, new Error('unreadable'));
    const first = await ahead.next();
    expect(first?.prepared).toBeInstanceOf(Error);
    expect(first?.item.i).toBe(0);
    expect(started).toHaveLength(9);
    expect((await ahead.next())?.prepared).toBe('second');
    expect(started).toHaveLength(10);
  });
});
