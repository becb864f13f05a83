/**
 * The console's static files, served by the gateway itself: htmx and its SSE extension from
 * `node_modules` (no CDN, no bundler), the console's own script and styles (`static/`) and its
 * icon (favicon.ts).
 * Read once at start; nothing is fetched when a page loads.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Router } from 'express';
import { FAVICON_SVG, FAVICON_TYPE } from './favicon.ts';

const require = createRequire(import.meta.url);
const here = dirname(fileURLToPath(import.meta.url));

/** Asset name → its file. */
const FILES: Record<string, { path: string; type: string }> = {
  // `main` of both packages lies in their `dist/` folder, next to the browser builds.
  'htmx.min.js': { path: join(dirname(require.resolve('htmx.org')), 'htmx.min.js'), type: 'text/javascript' },
  'sse.js': { path: join(dirname(require.resolve('htmx-ext-sse')), 'sse.js'), type: 'text/javascript' },
  'console.js': { path: join(here, 'static', 'console.js'), type: 'text/javascript' },
  'console.css': { path: join(here, 'static', 'console.css'), type: 'text/css' },
};

/** Routes `/assets/<name>` (mount under the console's path). */
export function assetsRouter(): Router {
  const router = Router();
  const loaded = [
    ...Object.entries(FILES).map(([name, f]) => [name, { body: readFileSync(f.path), type: f.type }] as const),
    ['favicon.svg', { body: Buffer.from(FAVICON_SVG), type: FAVICON_TYPE }] as const,
  ];
  for (const [name, asset] of loaded) {
    router.get(`/assets/${name}`, (_req, res) => {
      res.set({ 'Content-Type': `${asset.type}; charset=utf-8`, 'Cache-Control': 'private, max-age=300' }).send(asset.body);
    });
  }
  return router;
}
