/**
 * A browser editor for .cake files: Monaco with the VS Code API of
 * @codingame/monaco-vscode-api, the extension's own manifest, grammar and language
 * configuration, and vscode-languageclient (inside monaco-languageclient) talking to
 * `cake lsp` over a WebSocket (browser/bridge.mjs).
 *
 * The client options come from src/clientOptions.ts, the module the VS Code extension
 * uses, so the end-to-end test (browser/e2e.test.mjs) runs the extension's client code.
 * `window.cakeTest` exposes what the test reads.
 */

import * as monaco from '@codingame/monaco-vscode-editor-api';
import { LogLevel } from '@codingame/monaco-vscode-api';
import { MonacoLanguageClient } from 'monaco-languageclient';
import { EditorApp } from 'monaco-languageclient/editorApp';
import { MonacoVscodeApiWrapper, type MonacoVscodeApiConfig } from 'monaco-languageclient/vscodeApiWrapper';
import { useWorkerFactory, Worker as WorkerDescriptor } from 'monaco-languageclient/workerFactory';
import { State } from 'vscode-languageclient/browser.js';
import { toSocket, WebSocketMessageReader, WebSocketMessageWriter } from 'vscode-ws-jsonrpc';
import editorWorkerUrl from '@codingame/monaco-vscode-editor-api/esm/vs/editor/editor.worker.js?worker&url';
import textMateWorkerUrl from '@codingame/monaco-vscode-textmate-service-override/worker?worker&url';

import manifest from '../package.json';
import languageConfiguration from '../language-configuration.json?raw';
import grammar from '../syntaxes/cake.tmLanguage.json?raw';
import { CLIENT_ID, CLIENT_NAME, createClientOptions } from '../src/clientOptions';
import { RestartPolicy } from '../src/core/restartPolicy';
import { present, transition, type ServerEvent, type ServerState } from '../src/core/status';

interface CakeTest {
    ready: boolean;
    error?: string;
    state: ServerState;
    editor?: monaco.editor.IStandaloneCodeEditor;
    markers(): Array<{ code: string | undefined; line: number; column: number; endColumn: number; message: string; severity: number }>;
    text(): string;
}

declare global {
    interface Window { cakeTest: CakeTest }
}

const statusEl = document.getElementById('status')!;
let state: ServerState = 'stopped';

function update(event: ServerEvent, detail?: string): void {
    state = transition(state, event);
    window.cakeTest.state = state;
    statusEl.dataset.state = state;
    statusEl.textContent = present(state, detail).tooltip.split('\n')[0];
}

window.cakeTest = {
    ready: false,
    state,
    markers: () => [],
    text: () => '',
};

async function main(): Promise<void> {
    const kernelUri = '/workspace/gemm.cake';
    const kernel = await (await fetch('./kernel.cake')).text();

    const vscodeApiConfig: MonacoVscodeApiConfig = {
        $type: 'extended',
        viewsConfig: { $type: 'EditorService' },
        logLevel: LogLevel.Warning,
        userConfiguration: {
            json: JSON.stringify({
                'workbench.colorTheme': 'Default Dark Modern',
                'editor.fontSize': 15,
                'editor.lightbulb.enabled': 'on',
                'editor.minimap.enabled': false,
                'editor.unicodeHighlight.ambiguousCharacters': false,
                // A client-only setting: the shared middleware must keep it from the server.
                'cake.python': '/not/sent/to/the/server/python',
                'cake.arch': 'sm_90a',
            }),
        },
        monacoWorkerFactory: () => useWorkerFactory({
            workerLoaders: {
                editorWorkerService: () => new WorkerDescriptor(new URL(editorWorkerUrl, import.meta.url), { type: 'module' }),
                TextMateWorker: () => new WorkerDescriptor(new URL(textMateWorkerUrl, import.meta.url), { type: 'module' }),
            },
        }),
        extensions: [{
            // The VS Code manifest itself: language, grammar, settings and commands.
            config: { ...manifest, main: undefined, browser: undefined } as never,
            filesOrContents: new Map([
                ['/language-configuration.json', languageConfiguration],
                ['/syntaxes/cake.tmLanguage.json', grammar],
            ]),
        }],
    };
    await new MonacoVscodeApiWrapper(vscodeApiConfig).start();

    update({ kind: 'start' });
    const url = new URL('./lsp', window.location.href);
    url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
    const webSocket = new WebSocket(url);
    await new Promise<void>((resolve, reject) => {
        webSocket.onopen = () => resolve();
        webSocket.onerror = () => reject(new Error(`cannot connect to ${url}`));
    });
    const socket = toSocket(webSocket);
    const client = new MonacoLanguageClient({
        id: CLIENT_ID,
        name: CLIENT_NAME,
        clientOptions: createClientOptions(new RestartPolicy(), {
            onCrash: (decision) => update({ kind: 'crashed', willRestart: decision.restart }, decision.message),
        }),
        messageTransports: { reader: new WebSocketMessageReader(socket), writer: new WebSocketMessageWriter(socket) },
    });
    client.onDidChangeState((e) => {
        update(e.newState === State.Running ? { kind: 'running' }
            : e.newState === State.Starting ? { kind: 'start' } : { kind: 'stopped' });
    });
    await client.start();

    const app = new EditorApp({
        codeResources: { modified: { text: kernel, uri: kernelUri } },
        editorOptions: { automaticLayout: true, glyphMargin: true, fixedOverflowWidgets: true },
    });
    await app.start(document.getElementById('editor')!);
    const editor = app.getEditor()!;
    const model = editor.getModel()!;

    window.cakeTest.editor = editor;
    window.cakeTest.text = () => model.getValue();
    window.cakeTest.markers = () => monaco.editor.getModelMarkers({ resource: model.uri }).map((m) => ({
        code: typeof m.code === 'object' ? m.code.value : m.code,
        line: m.startLineNumber,
        column: m.startColumn,
        endColumn: m.endColumn,
        message: m.message,
        severity: m.severity,
    }));
    window.cakeTest.ready = true;
}

main().catch((e: unknown) => {
    window.cakeTest.error = e instanceof Error ? `${e.message}\n${e.stack}` : String(e);
    update({ kind: 'startFailed' }, window.cakeTest.error);
    console.error(e);
});
