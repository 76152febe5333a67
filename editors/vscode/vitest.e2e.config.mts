import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['e2e/**/*.e2e.ts'],
    testTimeout: 180000,
    hookTimeout: 240000,
    fileParallelism: false,
  },
});
