import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts', 'routers/**/*.test.ts', 'adapters/**/*.test.ts', 'server/**/*.test.ts', 'db/**/*.test.ts', 'schema/**/*.test.ts'],
    globalSetup: ['test/helpers/global-setup.ts'],
    pool: 'forks',
    // Vitest's default on this 2-core machine is one worker (cores - 1), which left a core idle most of the run:
    // the suite waits on servers, sockets and timers more than it computes. Two workers: 16 min -> 11.4 min.
    maxWorkers: 2,
    testTimeout: 30_000,
    hookTimeout: 60_000,
  },
});
