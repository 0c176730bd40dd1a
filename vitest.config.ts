import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts', 'routers/**/*.test.ts', 'adapters/**/*.test.ts', 'server/**/*.test.ts', 'db/**/*.test.ts', 'schema/**/*.test.ts'],
    globalSetup: ['test/helpers/global-setup.ts'],
    pool: 'forks',
    testTimeout: 30_000,
    hookTimeout: 60_000,
  },
});
