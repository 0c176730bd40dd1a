import postgres from 'postgres';
import { describe, expect, it } from 'vitest';
import { isRefusedByDatabase } from './errors.ts';

describe('isRefusedByDatabase: did the database itself refuse the statement', () => {
  it('is true for a SQLSTATE the server reported (the statement was rolled back)', () => {
    for (const code of ['23505', '23503', '40P01', '40001', '57014', '22P02']) expect(isRefusedByDatabase({ code }), code).toBe(true);
  });

  it('is false for connection exceptions and for errors of our side, whose outcome is unknown', async () => {
    for (const code of ['08006', '08003', '08000', 'CONNECTION_CLOSED', 'CONNECTION_ENDED', 'ECONNRESET', 'ETIMEDOUT', '2350', 'abcde']) {
      expect(isRefusedByDatabase({ code }), code).toBe(false);
    }
    for (const error of [new Error('worker thread exited'), null, undefined, 'text', { code: 23505 }]) expect(isRefusedByDatabase(error)).toBe(false);
    // What postgres.js really throws when it cannot reach the server: not a refusal by the database.
    const client = postgres('postgres://nobody@127.0.0.1:1/none', { max: 1, connect_timeout: 2, onnotice: () => {} });
    const unreachable = await client`select 1`.catch((error: unknown) => error);
    await client.end({ timeout: 1 });
    expect(unreachable).toBeInstanceOf(Error);
    expect(isRefusedByDatabase(unreachable)).toBe(false);
  });
});
