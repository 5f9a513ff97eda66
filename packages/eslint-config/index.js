// Why a package of its own: the repo compiles with TypeScript 7 (tsgo), which has no JavaScript
// compiler API, and typescript-eslint 8 parses with that API (peer typescript >=4.8.4 <6.1.0). pnpm
// resolves a peer from the package that depends on it, so depending on typescript-eslint here, beside
// typescript 6.0, gives the linter a parser it can load while everything else keeps TypeScript 7.
// The rules themselves live in the root eslint.config.js.
export { default as js } from '@eslint/js';
export { default as tseslint } from 'typescript-eslint';
export { default as globals } from 'globals';
