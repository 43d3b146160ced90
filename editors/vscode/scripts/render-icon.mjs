// Renders images/icon.svg to images/icon.png (128x128, transparent corners) with the
// machine's Chromium: `node scripts/render-icon.mjs`. The PNG is committed.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { chromium } from 'playwright-core';

import { CHROMIUM_ARGS, chromiumPath } from '../browser/chromium.mjs';

const svg = readFileSync(new URL('../images/icon.svg', import.meta.url), 'utf8');
const profile = mkdtempSync(join(tmpdir(), 'cake-icon-'));
const context = await chromium.launchPersistentContext(profile, {
    executablePath: chromiumPath(), args: CHROMIUM_ARGS, headless: true,
    viewport: { width: 128, height: 128 },
});
try {
    const page = await context.newPage();
    await page.setContent(`<html><body style="margin:0;background:transparent">${svg}</body></html>`);
    await page.locator('svg').screenshot({ path: new URL('../images/icon.png', import.meta.url).pathname, omitBackground: true });
} finally {
    await context.close();
    rmSync(profile, { recursive: true, force: true });
}
