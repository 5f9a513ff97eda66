import react from '@vitejs/plugin-react';
import { defineConfig } from 'vite';

const controlPlane = 'http://127.0.0.1:4000';

export default defineConfig({
  plugins: [react()],
  // public/ holds only the fallback page start.ts serves when the console is not built.
  publicDir: false,
  build: { outDir: 'dist', emptyOutDir: true, sourcemap: true },
  server: {
    proxy: {
      '/trpc': { target: controlPlane, changeOrigin: false },
      '/graphql': { target: controlPlane, changeOrigin: false },
    },
  },
});
