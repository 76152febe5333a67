import { defineConfig } from 'vitest/config';

// The panel benchmark (bench/panel.perf.ts): code-server + Chromium, prints figures.
export default defineConfig({
  test: {
    include: ['bench/**/*.perf.ts'],
    testTimeout: 1800000,
    hookTimeout: 300000,
    fileParallelism: false,
  },
});
