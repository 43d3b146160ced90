// How the tests start Chromium: Debian's build (playwright-core never downloads one),
// headless, with the flags that keep it from reaching for the network.
import { existsSync } from 'node:fs';

export const CHROMIUM_ARGS = [
    '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync',
];

/** The Chromium binary: $CHROMIUM_PATH, else Debian's /usr/bin/chromium; null if absent. */
export function chromiumPath() {
    for (const candidate of [process.env.CHROMIUM_PATH, '/usr/bin/chromium', '/usr/bin/chromium-browser']) {
        if (candidate && existsSync(candidate)) {
            return candidate;
        }
    }
    return null;
}
