/**
 * A real browser for the console's tests: Debian's Chromium (`apt-get install chromium`;
 * scripts/ensure-chromium) driven by playwright-core with `executablePath` set, so no browser is
 * ever downloaded. Each launch gets a fresh, temporary profile that is deleted on close.
 *
 * `describeBrowser` runs a file when Chromium and Envoy exist. In CI (CI=true) a missing Chromium
 * fails the file (its beforeAll throws), never skips it; elsewhere the file is skipped with one line
 * saying how to get Chromium, like describeE2E.
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type BrowserContext } from 'playwright-core';
import { describe } from 'vitest';
import { describeE2E } from './gateway';

/** Where Chromium is: CHROMIUM_BIN, else Debian's /usr/bin/chromium. */
export const CHROMIUM_BIN = process.env.CHROMIUM_BIN ?? '/usr/bin/chromium';

/** Why there is no browser, or undefined. */
export const browserMissing: string | undefined = existsSync(CHROMIUM_BIN)
  ? undefined
  : `Chromium not found at ${CHROMIUM_BIN}: run scripts/ensure-chromium (apt-get install chromium) or set CHROMIUM_BIN`;

let said = false;

/** `describe` for a browser test file (it also needs Envoy: the console is reached through it). */
export const describeBrowser: typeof describe = ((...args: Parameters<typeof describe>) => {
  if (browserMissing && !process.env.CI) {
    if (!said) process.stderr.write(`browser tests skipped: ${browserMissing}\n`);
    said = true;
    return describe.skip(...args);
  }
  return describeE2E(...args);
}) as typeof describe;

export interface Browser {
  readonly context: BrowserContext;
  close(): Promise<void>;
}

/** Launches Chromium headless on a fresh temporary profile; throws (fails the file) when there is none. */
export async function launchBrowser(): Promise<Browser> {
  if (browserMissing) throw new Error(browserMissing);
  const profile = mkdtempSync(join(tmpdir(), 'modelgate-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM_BIN,
    headless: true,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--no-first-run',
      '--disable-dev-shm-usage',
    ],
    viewport: { width: 1280, height: 860 },
    colorScheme: 'light',
    reducedMotion: 'reduce',
  });
  return {
    context,
    async close() {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}
