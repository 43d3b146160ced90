/**
 * The server state shown in the status bar, as a small state machine.
 *
 * The language client reports Starting/Running/Stopped; the error handler knows whether a
 * stop was a crash that will be restarted or the end. Events from both feed `transition`,
 * which keeps the displayed state honest: "ready" only once the server answered
 * `initialize`, "restarting" between a crash and the next start, "error" when the client
 * gave up or could not start the server at all.
 */

export type ServerState = 'stopped' | 'starting' | 'ready' | 'restarting' | 'error';

export type ServerEvent =
    | { kind: 'start' }
    | { kind: 'running' }
    | { kind: 'stopped' }
    | { kind: 'crashed'; willRestart: boolean }
    | { kind: 'startFailed' };

export function transition(state: ServerState, event: ServerEvent): ServerState {
    switch (event.kind) {
        case 'start':
            return state === 'restarting' ? 'restarting' : 'starting';
        case 'running':
            return 'ready';
        case 'crashed':
            return event.willRestart ? 'restarting' : 'error';
        case 'startFailed':
            return 'error';
        case 'stopped':
            // A stop after a crash is part of the crash: keep what the crash decided.
            return state === 'restarting' || state === 'error' ? state : 'stopped';
    }
}

export interface StatusPresentation {
    text: string;
    tooltip: string;
    /** Whether the item should be shown with the error background. */
    error: boolean;
}

/** How a state is shown: a codicon and a word, so it reads without colour. */
export function present(state: ServerState, detail?: string): StatusPresentation {
    const suffix = detail ? `\n${detail}` : '';
    switch (state) {
        case 'starting':
            return { text: '$(sync~spin) CAKE', tooltip: `CAKE language server: starting${suffix}`, error: false };
        case 'ready':
            return { text: '$(check) CAKE', tooltip: `CAKE language server: ready${suffix}`, error: false };
        case 'restarting':
            return { text: '$(debug-restart) CAKE', tooltip: `CAKE language server: restarting after a crash${suffix}`, error: false };
        case 'error':
            return { text: '$(error) CAKE', tooltip: `CAKE language server: not running${suffix}\nClick to show its output.`, error: true };
        case 'stopped':
            return { text: '$(circle-slash) CAKE', tooltip: `CAKE language server: stopped${suffix}`, error: false };
    }
}
