import { defineConfig } from 'vitest/config';

// Browser tests: real headless Chromium (playwright-core + the system's /usr/bin/chromium) against the
// platform started the way `pnpm start` starts it. One platform per file; tests in a file run in order.
export default defineConfig({
  test: {
    root: import.meta.dirname,
    include: ['e2e/**/*.e2e.ts'],
    globalSetup: ['e2e/global-setup.ts'],
    pool: 'forks',
    maxWorkers: 1,
    fileParallelism: false,
    testTimeout: 90_000,
    hookTimeout: 180_000,
    // CI asks for a JSON report too, to print one 'N passed, N failed' line over both suites.
    reporters: process.env['VITEST_JSON_DIR'] ? ['default', ['json', { outputFile: `${process.env['VITEST_JSON_DIR']}/e2e.json` }]] : ['default'],
  },
});
