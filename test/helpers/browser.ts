import { existsSync, mkdirSync } from 'node:fs';
import { chromium, type Browser } from 'playwright-core';

/** Debian's chromium, driven by playwright-core; CI installs it with apt-get. */
export const CHROMIUM = '/usr/bin/chromium';
/** Screenshots for a person to look at. */
export const OUTPUT = 'test-output';
// Outside CI a machine without chromium skips the browser files; CI installs it, so there they always run.
export const browserRunnable = existsSync(CHROMIUM) || Boolean(process.env.CI);

export async function launchChromium(extraArgs: string[] = []): Promise<Browser> {
  mkdirSync(OUTPUT, { recursive: true });
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--no-first-run',
      ...extraArgs,
    ],
  });
}
