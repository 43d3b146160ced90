import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { RestartPolicy } from '../../src/core/restartPolicy';

function clock(): { now: () => number; advance: (ms: number) => void } {
    let t = 1_000_000;
    return { now: () => t, advance: (ms: number) => { t += ms; } };
}

describe('RestartPolicy', () => {
    it('restarts up to maxRestarts crashes in the window, then gives up', () => {
        const c = clock();
        const policy = new RestartPolicy(3, 60_000, c.now);
        const decisions = [1, 2, 3, 4].map(() => { c.advance(1000); return policy.onCrash(); });
        assert.deepEqual(decisions.map((d) => d.restart), [true, true, true, false]);
        assert.deepEqual(decisions.map((d) => d.attempt), [1, 2, 3, 4]);
        assert.match(decisions[0].message, /restarting it \(attempt 1 of 3\)/);
        assert.match(decisions[3].message, /stopped 4 times in the last 1 minute and will not be restarted/);
    });

    it('forgets crashes older than the window', () => {
        const c = clock();
        const policy = new RestartPolicy(2, 60_000, c.now);
        policy.onCrash();
        policy.onCrash();
        c.advance(60_000);
        const d = policy.onCrash();
        assert.equal(d.restart, true);
        assert.equal(d.attempt, 1);
    });

    it('starts a fresh count after reset', () => {
        const c = clock();
        const policy = new RestartPolicy(1, 60_000, c.now);
        policy.onCrash();
        assert.equal(policy.onCrash().restart, false);
        policy.reset();
        assert.equal(policy.onCrash().restart, true);
    });

    it('with no restarts allowed, gives up at once', () => {
        assert.equal(new RestartPolicy(0).onCrash().restart, false);
    });

    it('rejects a negative or fractional limit', () => {
        assert.throws(() => new RestartPolicy(-1), RangeError);
        assert.throws(() => new RestartPolicy(1.5), RangeError);
    });
});
