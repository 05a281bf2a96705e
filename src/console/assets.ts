/**
 * The console's static files (assets/: the page, its script, its styles, its icon), read once
 * when the handler is built and served from memory. Nothing comes from a CDN or the network: the
 * page works offline, and its content security policy allows only these files.
 *
 * The files live beside the sources (src/console/assets/); from the build (dist/src/console/) the
 * same folder is found through the package root.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

export interface Asset {
  readonly type: string;
  readonly body: Buffer;
}

const FILES: ReadonlyArray<readonly [path: string, file: string, type: string]> = [
  ['/console/', 'index.html', 'text/html; charset=utf-8'],
  ['/console/app.js', 'app.js', 'text/javascript; charset=utf-8'],
  ['/console/app.css', 'app.css', 'text/css; charset=utf-8'],
  ['/console/icon.svg', 'icon.svg', 'image/svg+xml'],
];

/** The assets folder: beside this file (sources), or src/console/assets from dist/src/console. */
export function assetsDir(): string {
  const candidates = [join(__dirname, 'assets'), join(__dirname, '..', '..', '..', 'src', 'console', 'assets')];
  const dir = candidates.find((d) => existsSync(join(d, 'index.html')));
  if (!dir) throw new Error(`the console's files are missing (looked in ${candidates.join(', ')})`);
  return dir;
}

/** Every asset by its URL path. */
export function loadAssets(dir = assetsDir()): ReadonlyMap<string, Asset> {
  return new Map(FILES.map(([path, file, type]) => [path, { type, body: readFileSync(join(dir, file)) }]));
}
