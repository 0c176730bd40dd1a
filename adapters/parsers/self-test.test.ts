import { describe, expect, it } from 'vitest';
import { runParserSelfTest } from './self-test.ts';

describe('runParserSelfTest', () => {
  it('runs every parser on its sample file successfully', async () => {
    const results = await runParserSelfTest();
    expect(results.map((r) => r.kind)).toEqual(['pdf', 'docx', 'md', 'txt']);
    for (const result of results) {
      expect(result, result.error).toMatchObject({ ok: true });
      expect(result.error).toBeUndefined();
      expect(result.characters).toBeGreaterThan(0);
      expect(result.latencyMs).toBeGreaterThanOrEqual(0);
    }
    expect(results.find((r) => r.kind === 'pdf')!.pages).toBe(2);
    expect(results.filter((r) => r.kind !== 'pdf').every((r) => r.pages === null)).toBe(true);
  });
});
