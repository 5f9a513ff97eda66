import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: [
      'packages/*/src/**/*.test.ts',
      'packages/*/test/**/*.test.ts',
      'apps/*/src/**/*.test.ts',
      'apps/*/test/**/*.test.ts',
      'test/**/*.test.ts',
      'infra/test/**/*.test.ts',
    ],
    exclude: ['**/node_modules/**', 'apps/web/e2e/**'],
    pool: 'forks',
    maxWorkers: 2,
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // CI asks for a JSON report too, to print one 'N passed, N failed' line over both suites.
    reporters: process.env['VITEST_JSON_DIR'] ? ['default', ['json', { outputFile: `${process.env['VITEST_JSON_DIR']}/unit.json` }]] : ['default'],
  },
});
