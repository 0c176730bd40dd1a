import { describe, expect, it } from 'vitest';
import { createMemoryIndexes } from './memory-indexes.ts';

const quiet = { warn: () => {} };

describe('createMemoryIndexes', () => {
  it('answers only the version an index was built from', async () => {
    const indexes = createMemoryIndexes<string>({ budget: 10, kind: 'test', logger: quiet });
    await indexes.build('kb', async () => ({ version: '3', value: 'v3', size: 1 }));
    expect(indexes.get('kb', '3')).toBe('v3');
    expect(indexes.get('kb', '4')).toBeUndefined();
    expect(indexes.get('other', '3')).toBeUndefined();
  });

  it('holds at most its budget, dropping the least recently used first, and never one larger than the budget', async () => {
    const indexes = createMemoryIndexes<string>({ budget: 10, kind: 'test', logger: quiet });
    await indexes.build('a', async () => ({ version: '1', value: 'a', size: 4 }));
    await indexes.build('b', async () => ({ version: '1', value: 'b', size: 4 }));
    expect(indexes.get('a', '1')).toBe('a'); // a is now the most recently used
    await indexes.build('c', async () => ({ version: '1', value: 'c', size: 4 }));
    expect(indexes.get('b', '1')).toBeUndefined();
    expect(indexes.get('a', '1')).toBe('a');
    expect(indexes.get('c', '1')).toBe('c');
    await indexes.build('huge', async () => ({ version: '1', value: 'huge', size: 11 }));
    expect(indexes.get('huge', '1')).toBeUndefined();
    expect(indexes.get('a', '1')).toBe('a');
  });

  it('runs one build per key at a time, survives a failing build, and starts none once closed', async () => {
    const warnings: string[] = [];
    const indexes = createMemoryIndexes<string>({ budget: 10, kind: 'test', logger: { warn: (message) => warnings.push(message) } });
    let runs = 0;
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const slow = async () => {
      runs++;
      await gate;
      return { version: '1', value: 'x', size: 1 };
    };
    const first = indexes.build('kb', slow);
    const second = indexes.build('kb', slow);
    release();
    await Promise.all([first, second]);
    expect(runs).toBe(1);
    await indexes.build('bad', async () => {
      throw new Error('boom');
    });
    expect(warnings).toEqual(['test index build failed']);
    await indexes.close();
    expect(indexes.closed).toBe(true);
    await indexes.build('late', slow);
    expect(runs).toBe(1);
    expect(indexes.get('late', '1')).toBeUndefined();
  });
});
