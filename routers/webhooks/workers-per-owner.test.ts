import { describe, expect, it } from 'vitest';
import { webhookWorkersPerOwner } from './delivery.ts';

describe('webhookWorkersPerOwner', () => {
  it('keeps a quarter of the workers (at least one) back from any one owner by default', () => {
    expect([1, 2, 3, 4, 5, 8, 12, 64].map((workers) => webhookWorkersPerOwner(workers, undefined))).toEqual([1, 1, 2, 3, 4, 6, 9, 48]);
  });

  it('takes the configured number, but never more than there are workers', () => {
    expect(webhookWorkersPerOwner(8, 2)).toBe(2);
    expect(webhookWorkersPerOwner(8, 8)).toBe(8);
    expect(webhookWorkersPerOwner(4, 10)).toBe(4);
  });
});
