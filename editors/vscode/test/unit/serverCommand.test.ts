import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import {
    defaultPython,
    describe as describeCommand,
    expandPath,
    LaunchError,
    PYTHON_MODULE_ARGS,
    resolveServerCommand,
} from '../../src/core/serverCommand';

const linux = { platform: 'linux', workspaceFolder: '/work/proj', home: '/home/u', env: { VENV: '/opt/venv' } };

describe('resolveServerCommand', () => {
    it('runs `<serverPath> lsp` when cake.serverPath is set, ignoring cake.python', () => {
        const cmd = resolveServerCommand({ python: '/usr/bin/python3', serverPath: '/opt/venv/bin/cake' }, linux);
        assert.deepEqual(cmd, { command: '/opt/venv/bin/cake', args: ['lsp'], origin: 'cake.serverPath' });
    });

    it('runs `<python> -m cake lsp` from cake.python', () => {
        const cmd = resolveServerCommand({ python: '${workspaceFolder}/.venv/bin/python', serverPath: '' }, linux);
        assert.equal(cmd.command, '/work/proj/.venv/bin/python');
        assert.deepEqual(cmd.args, ['-m', 'cake', 'lsp']);
        assert.equal(cmd.origin, 'cake.python');
    });

    it('falls back to the platform interpreter', () => {
        assert.equal(resolveServerCommand({ python: '', serverPath: '' }, linux).command, 'python3');
        assert.equal(resolveServerCommand({ python: '', serverPath: '' }, { platform: 'win32' }).command, 'python');
        assert.equal(defaultPython('darwin'), 'python3');
    });

    it('never shares the argument list between calls', () => {
        const a = resolveServerCommand({ python: '', serverPath: '' }, linux);
        a.args.push('--tcp');
        assert.deepEqual([...PYTHON_MODULE_ARGS], ['-m', 'cake', 'lsp']);
    });
});

describe('expandPath', () => {
    it('expands variables, ~ and workspace-relative paths', () => {
        assert.equal(expandPath('${userHome}/bin/cake', linux), '/home/u/bin/cake');
        assert.equal(expandPath('~/venv/bin/python', linux), '/home/u/venv/bin/python');
        assert.equal(expandPath('${env:VENV}/bin/python', linux), '/opt/venv/bin/python');
        assert.equal(expandPath('.venv/bin/python', linux), '/work/proj/.venv/bin/python');
        assert.equal(expandPath('python3.11', linux), 'python3.11');
        assert.equal(expandPath('/abs/python', linux), '/abs/python');
    });

    it('expands an unset environment variable to nothing', () => {
        assert.equal(expandPath('${env:NOPE}python3', linux), 'python3');
    });

    it('uses Windows rules on Windows', () => {
        const win = { platform: 'win32', workspaceFolder: 'C:\\proj' };
        assert.equal(expandPath('.venv\\Scripts\\python.exe', win), 'C:\\proj\\.venv\\Scripts\\python.exe');
        assert.equal(expandPath('C:\\Python311\\python.exe', win), 'C:\\Python311\\python.exe');
    });

    it('says why ${workspaceFolder} cannot be expanded without a folder', () => {
        assert.throws(() => expandPath('${workspaceFolder}/.venv/bin/python', { platform: 'linux' }),
            (e: unknown) => e instanceof LaunchError && /no folder is open/.test(e.message));
    });
});

describe('describe', () => {
    it('quotes arguments with spaces', () => {
        const cmd = resolveServerCommand({ python: '/My Envs/python', serverPath: '' }, linux);
        assert.equal(describeCommand(cmd), '"/My Envs/python" -m cake lsp');
    });
});
