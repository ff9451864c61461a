import { defineConfig } from 'vite';

// The dispatcher serves the build at /ui/ (SWITCHYARD_WEB_DIR, default web/dist).
// `npm run dev` proxies the API to a dispatcher on SWITCHYARD_DISPATCHER_URL (default
// http://127.0.0.1:8080); the WebSocket stream needs same-origin, so use `npm run build`
// against the dispatcher to try the live views.
export default defineConfig({
  base: '/ui/',
  build: { outDir: 'dist', emptyOutDir: true, sourcemap: true, chunkSizeWarningLimit: 1000 },
  server: {
    proxy: { '/api': process.env.SWITCHYARD_DISPATCHER_URL || 'http://127.0.0.1:8080' },
  },
});
