// ESLint flat config: @eslint/js recommended and typescript-eslint's strict set over every workspace.
// The TypeScript parser comes from packages/eslint-config (its index.js says why it is a package).
// Not type-aware: `pnpm typecheck` (tsgo, strict) is the type gate, and a type-aware lint would check
// the code a second time with TypeScript 6.
import { defineConfig } from 'eslint/config';
import { globals, js, tseslint } from '@infer/eslint-config';

export default defineConfig(
  {
    ignores: ['**/node_modules/**', '**/dist/**', '**/coverage/**', 'test-results/**', '**/.data/**'],
  },
  js.configs.recommended,
  tseslint.configs.strict,
  {
    languageOptions: {
      ecmaVersion: 2024,
      sourceType: 'module',
      globals: { ...globals.node },
    },
    linterOptions: { reportUnusedDisableDirectives: 'error' },
    rules: {
      // With noUncheckedIndexedAccess, `xs[i]!` after a bounds check is this codebase's deliberate idiom;
      // the compiler already forces every other possibly-undefined value to be handled.
      '@typescript-eslint/no-non-null-assertion': 'off',
      // `let` declared before the signal handlers that read it and assigned once start-up reaches it.
      'prefer-const': ['error', { ignoreReadBeforeAssign: true }],
      // A leading underscore marks a binding kept on purpose (a positional parameter, a property dropped
      // from a rest spread).
      '@typescript-eslint/no-unused-vars': [
        'error',
        {
          argsIgnorePattern: '^_',
          varsIgnorePattern: '^_',
          caughtErrorsIgnorePattern: '^_',
          destructuredArrayIgnorePattern: '^_',
          ignoreRestSiblings: true,
        },
      ],
    },
  },
  {
    // Migrations take `Kysely<any>` by design (they must not import today's table types), and the
    // migrator and the PGlite dialect implement Kysely interfaces typed that way.
    files: ['packages/db/src/migrations/**/*.ts', 'packages/db/src/migrate.ts', 'packages/db/src/pglite-dialect.ts'],
    rules: { '@typescript-eslint/no-explicit-any': 'off' },
  },
  {
    // Tests read JSON bodies of real HTTP answers (`res.json()`) and poke at them field by field; typing
    // every response shape there would add noise, not safety. Source files stay `any`-free.
    files: ['**/test/**/*.ts', '**/*.test.ts'],
    rules: { '@typescript-eslint/no-explicit-any': 'off' },
  },
  {
    files: ['apps/web/src/**/*.{ts,tsx}'],
    languageOptions: { globals: { ...globals.browser } },
  },
);
