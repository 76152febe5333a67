import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['e2e/**/*.e2e.ts'],
    testTimeout: 480000, // the panel scenario takes ~150 s alone; the test machine is shared
    hookTimeout: 240000,
    fileParallelism: false,
  },
});
