import { afterAll, describe, expect, it } from 'vitest';
import { createDocumentPool } from '../workers/document-pool.ts';
import { runParserSelfTest } from './self-test.ts';

describe('runParserSelfTest', () => {
  const pool = createDocumentPool({ size: 1, deadlineMs: 30_000, memoryMb: 256 });
  afterAll(() => pool.close());

  it('runs every parser on its sample file successfully, in the worker pool', async () => {
    const results = await runParserSelfTest(pool.extract);
    expect(results.map((r) => r.kind)).toEqual(['pdf', 'docx', 'md', 'txt']);
    for (const result of results) {
      expect(result, result.error).toMatchObject({ ok: true });
      expect(result.error).toBeUndefined();
      expect(result.characters).toBeGreaterThan(0);
      expect(result.latencyMs).toBeGreaterThanOrEqual(0);
    }
    expect(results.find((r) => r.kind === 'pdf')!.pages).toBe(2);
    expect(results.filter((r) => r.kind !== 'pdf').every((r) => r.pages === null)).toBe(true);
    expect(pool.stats().started).toBe(1);
  });
});
