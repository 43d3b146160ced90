import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import {
    commandErrorMessage,
    costReport,
    isNotAvailable,
    isWorkspaceEdit,
    loweredCuda,
    REQUEST_FAILED,
    tacticChoices,
} from '../../src/core/results';

describe('loweredCuda', () => {
    it('reads a string or the text under a known key', () => {
        assert.equal(loweredCuda('__global__ void k() {}'), '__global__ void k() {}');
        assert.equal(loweredCuda({ cuda: 'A', source: 'B' }), 'A');
        assert.equal(loweredCuda({ source: 'B' }), 'B');
    });

    it('refuses an answer without source', () => {
        assert.throws(() => loweredCuda({ kernels: [] }), TypeError);
        assert.throws(() => loweredCuda(null), TypeError);
    });
});

describe('costReport', () => {
    it('uses the server Markdown, or shows the JSON as a code block', () => {
        assert.equal(costReport({ markdown: '# t' }), '# t');
        const md = costReport({ time_us: 12.5 });
        assert.match(md, /```json/);
        assert.match(md, /"time_us": 12.5/);
    });
});

describe('tacticChoices', () => {
    it('reads names and described objects, from a list or under "tactics"', () => {
        assert.deepEqual(tacticChoices(['stages']), [{ id: 'stages', label: 'stages' }]);
        assert.deepEqual(
            tacticChoices({ tactics: [{ name: 'tile', title: 'Tile size', description: '128x256', detail: 'x' }, { bogus: 1 }] }),
            [{ id: 'tile', label: 'Tile size', description: '128x256', detail: 'x' }],
        );
        assert.deepEqual(tacticChoices({ id: 'x' }), []);
        assert.deepEqual(tacticChoices(null), []);
    });
});

describe('errors', () => {
    const notAvailable = { code: REQUEST_FAILED, message: 'cake.lower is not available in this version of cake' };

    it('recognises the server\'s "not available" answer', () => {
        assert.equal(isNotAvailable(notAvailable), true);
        assert.equal(isNotAvailable({ code: -32602, message: 'not available' }), false);
        assert.equal(isNotAvailable(undefined), false);
        assert.match(commandErrorMessage('cake.lower', notAvailable), /Update CAKE/);
    });

    it('names the command of any other failure', () => {
        assert.equal(commandErrorMessage('cake.cost', new Error('boom')), 'CAKE: cake.cost failed: boom');
    });
});

describe('isWorkspaceEdit', () => {
    it('spots the two shapes of a workspace edit', () => {
        assert.equal(isWorkspaceEdit({ changes: {} }), true);
        assert.equal(isWorkspaceEdit({ documentChanges: [] }), true);
        assert.equal(isWorkspaceEdit({ applied: true }), false);
        assert.equal(isWorkspaceEdit(null), false);
    });
});
