/**
 * The browser of the browser tests (test/console.test.ts: the console and the queue dashboard): Debian's
 * chromium (`.ci/run` installs it), driven by playwright-core, launched once for the file, with one page the
 * tests navigate (a new page costs chromium ~1.5–2 CPU-s, a navigation of the same page ~0.2).
 *
 * Screenshots are opt-in: `HERMES_SCREENSHOTS=1 npx vitest run test/console.test.ts` writes the console's
 * screenshots into docs/images/ (docs/CONSOLE.md shows them). Without it no screenshot is taken: the tests
 * assert on the rendered page, which a PNG adds nothing to, and a run leaves the tree as it was (the four
 * full-page screenshots cost chromium ~2 s of CPU a run).
 */
import { statSync } from 'node:fs';
import type { Browser, Page } from 'playwright-core';
import { expect } from 'vitest';

export const CHROMIUM = '/usr/bin/chromium';

/** Whether this run writes the screenshots of docs/images/ (`HERMES_SCREENSHOTS=1`). */
export const SCREENSHOTS = process.env.HERMES_SCREENSHOTS === '1';

/** Headless chromium; close it when done. */
export async function launchChromium(): Promise<Browser> {
  const { chromium } = await import('playwright-core');
  return chromium.launch({
    executablePath: CHROMIUM,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--no-first-run',
    ],
  });
}

/**
 * With `HERMES_SCREENSHOTS=1`, a full-page screenshot of `page` at `path`, which must come out at least
 * `minBytes` (a blank page is smaller); otherwise nothing.
 */
export async function screenshot(page: Page, path: string, minBytes = 10_000): Promise<void> {
  if (!SCREENSHOTS) return;
  await page.screenshot({ path, fullPage: true });
  expect(statSync(path).size).toBeGreaterThan(minBytes);
}
