import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { scoreInto, TopK } from './vector-index.ts';

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

describe('scoreInto', () => {
  it('scores every row exactly as the full dot product does, however sparse the query', () => {
    const value = fc.oneof(fc.constant(0), fc.float({ min: -1, max: 1, noNaN: true, noDefaultInfinity: true }));
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 12 }).chain((dims) =>
          fc.record({
            query: fc.array(value, { minLength: dims, maxLength: dims }),
            rows: fc.array(fc.array(value, { minLength: dims, maxLength: dims }), { maxLength: 20 }),
          }),
        ),
        ({ query, rows }) => {
          const dims = query.length;
          const q = Float32Array.from(query);
          const data = Float32Array.from(rows.flat());
          const ids = rows.map((_, i) => `c${String(i).padStart(3, '0')}`);
          const best = new TopK(rows.length);
          scoreInto({ ids, dims, data }, q, best);
          const expected = new TopK(rows.length);
          ids.forEach((id, row) => {
            let dot = 0;
            for (let d = 0; d < dims; d++) dot += data[row * dims + d]! * q[d]!;
            expected.offer(id, dot);
          });
          expect(best.sorted()).toEqual(expected.sorted());
        },
      ),
    );
  });
});
