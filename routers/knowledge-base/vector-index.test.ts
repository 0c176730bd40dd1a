import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { TopK } from './vector-index.ts';

describe('TopK', () => {
  it('keeps what a full sort keeps, in the same order (similarity descending, then chunk id)', () => {
    fc.assert(
      fc.property(
        // Few distinct scores and ids so that ties are common.
        fc.array(fc.record({ id: fc.constantFrom('a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'), score: fc.integer({ min: -3, max: 3 }) }), { maxLength: 60 }),
        fc.integer({ min: 0, max: 12 }),
        (items, k) => {
          const unique = [...new Map(items.map((item, i) => [`${item.id}${i}`, { ...item, id: `${item.id}${i}` }])).values()];
          const top = new TopK(k);
          for (const item of unique) top.offer(item.id, item.score / 2);
          const expected = unique
            .map((item) => ({ chunkId: item.id, similarity: item.score / 2 }))
            .sort((a, b) => b.similarity - a.similarity || (a.chunkId < b.chunkId ? -1 : a.chunkId > b.chunkId ? 1 : 0))
            .slice(0, k);
          expect(top.sorted()).toEqual(expected);
        },
      ),
    );
  });
});
