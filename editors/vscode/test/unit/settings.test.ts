import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import {
    filterConfigurationResult,
    initializationOptions,
    launchSettings,
    needsRestart,
    serverSection,
} from '../../src/core/settings';

const vscodeSection = {
    python: '/opt/venv/bin/python',
    serverPath: '',
    arch: 'sm_90a',
    plugins: { disabled: ['cake-tactics', 'CK301'] },
    simulateOnSave: true,
    nvccPath: '/usr/local/cuda/bin/nvcc',
    trace: { server: 'off' },
};

describe('serverSection', () => {
    it('keeps only the keys the server reads', () => {
        assert.deepEqual(serverSection(vscodeSection), {
            arch: 'sm_90a',
            plugins: { disabled: ['cake-tactics', 'CK301'] },
            simulateOnSave: true,
            nvccPath: '/usr/local/cuda/bin/nvcc',
        });
    });

    it('gives the documented defaults for an empty or missing section', () => {
        const defaults = { arch: null, plugins: { disabled: [] }, simulateOnSave: false, nvccPath: null };
        assert.deepEqual(serverSection({}), defaults);
        assert.deepEqual(serverSection(undefined), defaults);
        assert.deepEqual(serverSection(null), defaults);
    });

    it('turns the empty strings of the settings editor into null', () => {
        const s = serverSection({ arch: '', nvccPath: '  ' });
        assert.equal(s.arch, null);
        assert.equal(s.nvccPath, null);
    });

    it('reads the section nested under "cake" as well', () => {
        assert.equal(serverSection({ cake: { arch: 'sm_80' } }).arch, 'sm_80');
    });

    it('passes values of the wrong kind through for the server to report', () => {
        const s = serverSection({ arch: 90, simulateOnSave: 'yes', plugins: { disabled: 'CK301' } });
        assert.equal(s.arch as unknown, 90);
        assert.equal(s.simulateOnSave as unknown, 'yes');
        assert.equal(s.plugins.disabled as unknown, 'CK301');
    });
});

describe('initializationOptions', () => {
    it('holds the server section under "cake"', () => {
        assert.deepEqual(initializationOptions(vscodeSection), { cake: serverSection(vscodeSection) });
        assert.equal('python' in initializationOptions(vscodeSection).cake, false);
    });
});

describe('filterConfigurationResult', () => {
    it('filters the cake section and leaves other sections alone', () => {
        const out = filterConfigurationResult(
            [{ section: 'cake' }, { section: 'editor' }, {}],
            [vscodeSection, { tabSize: 4 }, 7],
        );
        assert.deepEqual(out, [serverSection(vscodeSection), { tabSize: 4 }, 7]);
    });

    it('answers a request for one server key and hides the client-only keys', () => {
        const out = filterConfigurationResult(
            [{ section: 'cake.arch' }, { section: 'cake.python' }, { section: 'cake.plugins.disabled' }],
            ['sm_80', '/usr/bin/python3', ['x']],
        );
        assert.deepEqual(out, ['sm_80', null, ['x']]);
    });
});

describe('launchSettings and needsRestart', () => {
    it('reads the launch settings, trimming blanks', () => {
        assert.deepEqual(launchSettings({ python: ' py ', serverPath: '' }), { python: 'py', serverPath: '' });
        assert.deepEqual(launchSettings(undefined), { python: '', serverPath: '' });
    });

    it('restarts only for the settings that change the command line', () => {
        assert.equal(needsRestart(['python']), true);
        assert.equal(needsRestart(['cake.serverPath']), true);
        assert.equal(needsRestart(['arch', 'plugins', 'simulateOnSave', 'nvccPath']), false);
        assert.equal(needsRestart([]), false);
    });
});
