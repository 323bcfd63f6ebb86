import { defineConfig } from 'vite';
import react from '@vitejs/plugin-react';

// `npm run dev` proxies the API to a server started with `make run`.
export default defineConfig({
  plugins: [react()],
  base: '/',
  build: {
    outDir: 'dist',
    // GraphiQL's Monaco editor is a few MB; it loads only on the GraphiQL page.
    chunkSizeWarningLimit: 6000,
    rolldownOptions: {
      onwarn(warning, warn) {
        // GraphiQL's React-compiler directives ("use no memo") are harmless when bundled.
        if (warning.code === 'MODULE_LEVEL_DIRECTIVE') return;
        warn(warning);
      },
    },
  },
  worker: { format: 'es' },
  server: { proxy: { '/graphql': 'http://127.0.0.1:8000' } },
});
