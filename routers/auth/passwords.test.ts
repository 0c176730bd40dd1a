import { describe, expect, it } from 'vitest';
import { hashPassword, passwordHashLoad, verifyPassword } from './passwords.ts';

describe('passwords', () => {
  it('hashes and verifies; a wrong password or a malformed stored value is false', async () => {
    const stored = await hashPassword('correct horse battery');
    expect(await verifyPassword('correct horse battery', stored)).toBe(true);
    expect(await verifyPassword('wrong horse battery', stored)).toBe(false);
    expect(await verifyPassword('correct horse battery', stored.replace(/\$[^$]*$/, '$'))).toBe(false);
  });

  it('runs at most two hashes at once, however many are asked for: the others wait their turn', async () => {
    let mostRunning = 0;
    let sawWaiting = false;
    let done = false;
    const watch = (async () => {
      while (!done) {
        const load = passwordHashLoad();
        mostRunning = Math.max(mostRunning, load.running);
        sawWaiting ||= load.waiting > 0;
        await new Promise((resolve) => setTimeout(resolve, 2));
      }
    })();
    const hashes = await Promise.all(Array.from({ length: 6 }, (_, i) => hashPassword(`password number ${i}`)));
    done = true;
    await watch;
    expect(new Set(hashes).size).toBe(6);
    expect(mostRunning).toBe(2);
    expect(sawWaiting).toBe(true);
    expect(passwordHashLoad()).toEqual({ running: 0, waiting: 0 });
  });
});
