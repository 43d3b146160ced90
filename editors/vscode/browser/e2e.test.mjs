// The browser end to end test: the extension's client code (src/clientOptions.ts inside
// monaco-languageclient) in headless Chromium, against `cake lsp` through browser/bridge.mjs.
// It opens a .cake file with a planted error, waits for the marker, applies the quick fix
// from the editor's code-action menu and waits for the marker to clear. The screenshot it
// takes is test-results/browser.png.
//
//   npm run build:browser && npm run test:browser
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';

import { chromium } from 'playwright-core';

import { SAMPLE_KERNEL, startBridge } from './bridge.mjs';
import { CHROMIUM_ARGS, chromiumPath } from './chromium.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const results = join(here, '..', 'test-results');
const executablePath = chromiumPath();
const built = existsSync(join(here, 'dist', 'index.html'));
const skip = !executablePath ? 'Chromium is not installed (apt-get install chromium)'
    : !built ? 'the browser client is not built (npm run build:browser)' : false;

// Non-ASCII text before the error on its line: Monaco counts UTF-16 code units, and the
// emoji is two of them, so a wrong position encoding would put the marker elsewhere.
const original = readFileSync(SAMPLE_KERNEL, 'utf8').replaceAll('"load"', '"lõad𝛼"');
const planted = original.replace('regs=40', 'reg=40');
const lines = planted.split('\n');
const errorLine = lines.findIndex((l) => l.includes('reg=40'));
const errorColumn = lines[errorLine].indexOf('reg=40'); // UTF-16 code units, as JavaScript counts

let tmp, bridge, context, page;
const consoleLines = [];
const serverLog = [];

before(async () => {
    if (skip) return;
    tmp = mkdtempSync(join(tmpdir(), 'cake-browser-'));
    const kernelFile = join(tmp, 'gemm.cake');
    writeFileSync(kernelFile, planted);
    bridge = await startBridge({ kernelFile, record: true, log: (l) => serverLog.push(l) });
    context = await chromium.launchPersistentContext(join(tmp, 'profile'), {
        executablePath, args: CHROMIUM_ARGS, headless: true, viewport: { width: 1100, height: 500 },
    });
    page = context.pages()[0] ?? await context.newPage();
    page.on('console', (m) => consoleLines.push(`${m.type()}: ${m.text()}`));
    page.on('pageerror', (e) => consoleLines.push(`pageerror: ${e.message}`));
});

after(async () => {
    if (skip) return;
    await context?.close();
    await bridge?.close();
    rmSync(tmp, { recursive: true, force: true });
});

/** Waits for `fn` (run in the page) to return something truthy, with the page log on failure. */
async function until(what, fn, arg, timeout = 60000) {
    try {
        return await (await page.waitForFunction(fn, arg, { timeout, polling: 100 })).jsonValue();
    } catch (e) {
        const state = await page.evaluate(() => ({ error: window.cakeTest?.error, state: window.cakeTest?.state })).catch(() => ({}));
        throw new Error(`timed out waiting for ${what}: ${e.message}\npage: ${JSON.stringify(state)}\n`
            + `console:\n${consoleLines.slice(-30).join('\n')}\nserver:\n${serverLog.slice(-30).join('\n')}`);
    }
}

test('the browser client shows the diagnostic, applies the quick fix and clears it', { skip, timeout: 240000 }, async () => {
    await page.goto(bridge.url);
    await until('the editor and language client', () => window.cakeTest?.ready || window.cakeTest?.error);
    assert.equal(await page.evaluate(() => window.cakeTest.error), undefined);
    assert.equal(await page.evaluate(() => window.cakeTest.state), 'ready');

    const [marker] = await until('the CK103 marker', () => {
        const m = window.cakeTest.markers();
        return m.length > 0 ? m : null;
    });
    assert.equal(marker.code, 'CK103');
    assert.equal(marker.line, errorLine + 1);
    assert.equal(marker.column, errorColumn + 1);
    assert.equal(marker.endColumn, errorColumn + 1 + 'reg'.length);
    assert.match(marker.message, /role has no parameter `reg`/);
    assert.equal(await page.evaluate(() => window.cakeTest.markers().length), 1);

    // The grammar is in use: the primitive and the role name are coloured differently from
    // plain identifiers (TextMate tokens become mtk<N> classes).
    const colours = await page.evaluate(() => {
        const spans = [...document.querySelectorAll('.view-line span span')];
        const colour = (text) => {
            const s = spans.find((x) => x.textContent === text);
            return s ? getComputedStyle(s).color : null;
        };
        return { primitive: colour('tma_load'), variable: colour('sa'), keyword: colour('with') };
    });
    assert.ok(colours.primitive && colours.variable && colours.primitive !== colours.variable, JSON.stringify(colours));

    // The shared client code ran: the server got only its own settings.
    const init = bridge.messages.find((m) => m.from === 'client' && m.message.method === 'initialize');
    assert.deepEqual(init.message.params.initializationOptions,
        { cake: { arch: 'sm_90a', plugins: { disabled: [] }, simulateOnSave: false, nvccPath: null } });
    const request = bridge.messages.find((m) => m.from === 'server' && m.message.method === 'workspace/configuration');
    const answer = bridge.messages.find((m) => m.from === 'client' && request && m.message.id === request.message.id && 'result' in m.message);
    assert.ok(answer, 'the server asked for its settings and got an answer');
    assert.deepEqual(answer.message.result[0], { arch: 'sm_90a', plugins: { disabled: [] }, simulateOnSave: false, nvccPath: null });
    const initialized = bridge.messages.find((m) => m.from === 'server' && m.message.id === init.message.id);
    assert.equal(initialized.message.result.capabilities.positionEncoding ?? 'utf-16', 'utf-16');

    // What a user sees: the error's hover, with its code and quick fix.
    await page.evaluate(({ line, column }) => {
        const editor = window.cakeTest.editor;
        editor.setPosition({ lineNumber: line, column: column + 1 });
        editor.revealLineInCenter(line);
        editor.focus();
        editor.trigger('test', 'editor.action.showHover', {});
    }, { line: errorLine + 1, column: errorColumn + 1 });
    await until('the hover', () => [...document.querySelectorAll('.monaco-hover')].some((h) => h.textContent.includes('CK103')));
    mkdirSync(results, { recursive: true });
    await page.screenshot({ path: join(results, 'browser.png') });

    // Apply the quick fix from the code-action menu (Ctrl+.), as a user would.
    await page.keyboard.press('Escape');
    await page.keyboard.press('Control+.');
    await until('the quick fix menu', () => [...document.querySelectorAll('.action-widget .action-label, .action-widget [role="option"]')]
        .some((e) => e.textContent.includes('rename to `regs`')));
    await page.keyboard.press('Enter');
    await until('the fixed text', () => window.cakeTest.text().includes('regs=40'));
    assert.equal(await page.evaluate(() => window.cakeTest.text()), original);

    await until('the marker to clear', () => window.cakeTest.markers().length === 0);
    const kinds = bridge.messages.filter((m) => m.from === 'client').map((m) => m.message.method);
    assert.ok(kinds.includes('textDocument/codeAction'));
    assert.ok(kinds.includes('textDocument/didChange'));
});
