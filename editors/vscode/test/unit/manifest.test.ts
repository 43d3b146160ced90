// The manifest and the client code must agree: every server setting is contributed, every
// contributed command is registered, and the files the manifest names exist.
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import * as path from 'node:path';
import { describe, it } from 'node:test';

import { LAUNCH_KEYS, SERVER_KEYS } from '../../src/core/settings';

const root = path.resolve(__dirname, '..', '..', '..');
const pkg = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8'));
const source = (name: string): string => readFileSync(path.join(root, 'src', name), 'utf8');

describe('package.json', () => {
    it('contributes every setting the client and the server read', () => {
        const props = Object.keys(pkg.contributes.configuration.properties);
        const expected = [...LAUNCH_KEYS, ...SERVER_KEYS.map((k) => (k === 'plugins' ? 'plugins.disabled' : k)), 'trace.server']
            .map((k) => `cake.${k}`);
        assert.deepEqual([...props].sort(), [...expected].sort());
    });

    it('registers every contributed command in the code', () => {
        const code = source('extension.ts') + source('commands.ts');
        for (const { command } of pkg.contributes.commands) {
            assert.ok(code.includes(`'${command}'`), `${command} is contributed but never registered`);
        }
    });

    it('does not reuse the names of the server commands (the language client registers those)', () => {
        const server = ['cake.check', 'cake.lower', 'cake.cost', 'cake.applyTactic', 'cake.simulate'];
        for (const { command } of pkg.contributes.commands) {
            assert.ok(!server.includes(command), command);
        }
    });

    it('names files that exist', () => {
        for (const file of [pkg.main.replace('./dist/', 'src/').replace('.js', '.ts'), pkg.icon,
            pkg.contributes.languages[0].configuration, pkg.contributes.grammars[0].path]) {
            assert.ok(existsSync(path.join(root, file)), file);
        }
    });

    it('declares the language for .cake files with the grammar\'s scope', () => {
        const grammar = JSON.parse(readFileSync(path.join(root, pkg.contributes.grammars[0].path), 'utf8'));
        assert.equal(pkg.contributes.languages[0].id, 'cake');
        assert.deepEqual(pkg.contributes.languages[0].extensions, ['.cake']);
        assert.equal(grammar.scopeName, pkg.contributes.grammars[0].scopeName);
    });
});
