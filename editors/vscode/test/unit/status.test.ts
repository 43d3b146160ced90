import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { present, transition, type ServerEvent, type ServerState } from '../../src/core/status';

function run(events: ServerEvent[], from: ServerState = 'stopped'): ServerState[] {
    const seen: ServerState[] = [];
    let s = from;
    for (const e of events) {
        s = transition(s, e);
        seen.push(s);
    }
    return seen;
}

describe('transition', () => {
    it('goes starting -> ready on a normal start', () => {
        assert.deepEqual(run([{ kind: 'start' }, { kind: 'running' }]), ['starting', 'ready']);
    });

    it('stays "restarting" through the stop and start that follow a crash', () => {
        assert.deepEqual(
            run([{ kind: 'start' }, { kind: 'running' }, { kind: 'crashed', willRestart: true },
                { kind: 'stopped' }, { kind: 'start' }, { kind: 'running' }]),
            ['starting', 'ready', 'restarting', 'restarting', 'restarting', 'ready'],
        );
    });

    it('shows an error when the client gives up, and keeps it through the stop', () => {
        assert.deepEqual(
            run([{ kind: 'crashed', willRestart: false }, { kind: 'stopped' }], 'ready'),
            ['error', 'error'],
        );
    });

    it('shows an error when the server cannot start, until the next start', () => {
        assert.deepEqual(run([{ kind: 'start' }, { kind: 'startFailed' }, { kind: 'start' }]),
            ['starting', 'error', 'starting']);
    });

    it('an ordinary stop is "stopped"', () => {
        assert.equal(transition('ready', { kind: 'stopped' }), 'stopped');
    });
});

describe('present', () => {
    it('gives each state its own icon and word, and marks only errors', () => {
        const states: ServerState[] = ['stopped', 'starting', 'ready', 'restarting', 'error'];
        const texts = states.map((s) => present(s).text);
        assert.equal(new Set(texts).size, states.length);
        assert.deepEqual(states.filter((s) => present(s).error), ['error']);
        assert.match(present('starting').text, /sync~spin/);
        assert.match(present('ready').tooltip, /ready/);
    });

    it('adds the detail to the tooltip', () => {
        assert.match(present('error', 'python3 was not found').tooltip, /python3 was not found/);
    });
});
