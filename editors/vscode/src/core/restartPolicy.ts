/**
 * When a crashed server is started again.
 *
 * A server that dies at start-up (a wrong interpreter, CAKE not installed) would otherwise
 * be restarted forever; one that crashes once an hour on a rare input should come back
 * every time. So restarts are counted in a sliding window: up to `maxRestarts` crashes
 * within `windowMs` are restarted, the next one stops the server with a message.
 */

export interface RestartDecision {
    restart: boolean;
    /** 1 for the first crash of the window. */
    attempt: number;
    message: string;
}

export class RestartPolicy {
    private crashes: number[] = [];

    constructor(
        readonly maxRestarts: number = 4,
        readonly windowMs: number = 3 * 60 * 1000,
        private readonly now: () => number = Date.now,
    ) {
        if (!Number.isInteger(maxRestarts) || maxRestarts < 0) {
            throw new RangeError(`maxRestarts must be a whole number >= 0, not ${maxRestarts}`);
        }
    }

    /** Records a crash and says whether to restart. */
    onCrash(): RestartDecision {
        const t = this.now();
        this.crashes = this.crashes.filter((c) => t - c < this.windowMs);
        this.crashes.push(t);
        const attempt = this.crashes.length;
        const minutes = Math.round(this.windowMs / 60000);
        if (attempt <= this.maxRestarts) {
            return {
                restart: true,
                attempt,
                message: `The CAKE language server stopped unexpectedly; restarting it `
                    + `(attempt ${attempt} of ${this.maxRestarts}).`,
            };
        }
        return {
            restart: false,
            attempt,
            message: `The CAKE language server stopped ${attempt} times in the last ${minutes} `
                + `minute${minutes === 1 ? '' : 's'} and will not be restarted. See the "CAKE Language Server" `
                + `output for the reason, then run "CAKE: Restart Language Server".`,
        };
    }

    /** Forgets past crashes: a restart the user asked for starts a fresh count. */
    reset(): void {
        this.crashes = [];
    }
}
