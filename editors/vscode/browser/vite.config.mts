// Builds the browser client (browser/index.html + main.ts) into browser/dist.
import { defineConfig } from 'vite';

export default defineConfig({
    root: import.meta.dirname,
    base: './',
    logLevel: 'warn',
    build: {
        outDir: 'dist',
        emptyOutDir: true,
        target: 'esnext',
        assetsInlineLimit: 0,
        chunkSizeWarningLimit: 20000,
        reportCompressedSize: false,
    },
    worker: { format: 'es' },
    resolve: { dedupe: ['vscode', 'vscode-languageclient', 'vscode-jsonrpc'] },
});
