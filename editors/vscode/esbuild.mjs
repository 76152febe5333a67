import { build } from 'esbuild';
import { cpSync, mkdirSync } from 'node:fs';

const watch = process.argv.includes('--watch');
mkdirSync('dist', { recursive: true });
await Promise.all([
  build({
    entryPoints: ['src/extension.ts'], bundle: true, platform: 'node', target: 'node20', format: 'cjs',
    external: ['vscode'], outfile: 'dist/extension.js', sourcemap: true, minify: true, keepNames: true, logLevel: 'warning',
  }),
  build({
    entryPoints: ['webview/main.ts'], bundle: true, platform: 'browser', target: 'es2022', format: 'iife', minify: true,
    outfile: 'dist/webview.js', sourcemap: true, logLevel: 'warning',
  }),
]);
cpSync('webview/style.css', 'dist/webview.css');
if (watch) console.log('built');
