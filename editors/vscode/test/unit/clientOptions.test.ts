// src/clientOptions.ts imports `vscode`, which only exists inside VS Code. This test puts a
// small stand-in in its place (configuration values and nothing else) to check the crash
// handler and the configuration middleware the extension and the browser client share.
import assert from 'node:assert/strict';
import Module from 'node:module';
import { describe, it } from 'node:test';

import type * as ClientOptionsModule from '../../src/clientOptions';
import { RestartPolicy, type RestartDecision } from '../../src/core/restartPolicy';

const userSettings: Record<string, unknown> = {
    python: '/opt/venv/bin/python',
    serverPath: '',
    arch: 'sm_80',
    'plugins.disabled': ['CK301'],
    simulateOnSave: false,
    nvccPath: '',
};

const vscodeStub = new Proxy({
    workspace: {
        getConfiguration: (section: string) => {
            assert.equal(section, 'cake');
            return { get: (key: string) => userSettings[key] };
        },
    },
} as Record<string | symbol, unknown>, {
    // vscode-languageclient touches a few classes and enums of `vscode` while loading.
    get: (target, prop) => (prop in target ? target[prop] : (target[prop] = class {})),
});

type Loader = (request: string, parent: unknown, isMain: boolean) => unknown;
const moduleWithLoad = Module as unknown as { _load: Loader };
const originalLoad = moduleWithLoad._load;
moduleWithLoad._load = function (request, parent, isMain) {
    return request === 'vscode' ? vscodeStub : originalLoad.call(this, request, parent, isMain);
};
const clientOptions = require('../../src/clientOptions') as typeof ClientOptionsModule;
moduleWithLoad._load = originalLoad;

describe('createClientOptions', () => {
    it('sends only the server settings as initializationOptions', () => {
        const options = clientOptions.createClientOptions(new RestartPolicy());
        const init = (options.initializationOptions as () => unknown)();
        assert.deepEqual(init, { cake: { arch: 'sm_80', plugins: { disabled: ['CK301'] }, simulateOnSave: false, nvccPath: null } });
    });

    it('filters the answers to workspace/configuration', async () => {
        const options = clientOptions.createClientOptions(new RestartPolicy());
        const middleware = options.middleware!.workspace!.configuration!;
        const raw = clientOptions.rawCakeSection();
        const answer = await middleware({ items: [{ section: 'cake' }, { section: 'files' }] }, {} as never,
            async () => [raw, { exclude: {} }]);
        assert.deepEqual(answer, [
            { arch: 'sm_80', plugins: { disabled: ['CK301'] }, simulateOnSave: false, nvccPath: null },
            { exclude: {} },
        ]);
    });

    it('selects .cake documents on disk and untitled ones', () => {
        const options = clientOptions.createClientOptions(new RestartPolicy());
        assert.deepEqual(options.documentSelector, [
            { scheme: 'file', language: 'cake' }, { scheme: 'untitled', language: 'cake' },
        ]);
        assert.deepEqual(options.synchronize, { configurationSection: 'cake' });
    });
});

describe('crashHandler', () => {
    it('restarts as the policy allows, then stops, telling the caller each time', async () => {
        const seen: RestartDecision[] = [];
        const handler = clientOptions.crashHandler(new RestartPolicy(2), { onCrash: (d) => seen.push(d) });
        const results = [await handler.closed(), await handler.closed(), await handler.closed()];
        // CloseAction.Restart = 2, CloseAction.DoNotRestart = 1 (vscode-languageclient).
        assert.deepEqual(results.map((r) => r.action), [2, 2, 1]);
        assert.ok(results.every((r) => r.handled === true), 'the extension shows its own message');
        assert.deepEqual(seen.map((d) => d.restart), [true, true, false]);
        assert.equal(results[2].message, seen[2].message);
    });

    it('tolerates a few broken messages, then shuts the connection down', async () => {
        const handler = clientOptions.crashHandler(new RestartPolicy(), {});
        const error = new Error('write EPIPE');
        // ErrorAction.Continue = 1, ErrorAction.Shutdown = 2.
        assert.equal((await handler.error(error, undefined, 1)).action, 1);
        assert.equal((await handler.error(error, undefined, 3)).action, 1);
        assert.equal((await handler.error(error, undefined, 4)).action, 2);
    });
});
