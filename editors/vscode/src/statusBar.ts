/** The status-bar item that shows the server's state (see `core/status.ts`). */

import * as vscode from 'vscode';

import { present, transition, type ServerEvent, type ServerState } from './core/status';

export class StatusItem implements vscode.Disposable {
    private readonly item = vscode.window.createStatusBarItem('cake.server', vscode.StatusBarAlignment.Right, 100);
    private state: ServerState = 'stopped';

    constructor() {
        this.item.name = 'CAKE Language Server';
        this.item.command = 'cake.showOutput';
        this.render();
        this.item.show();
    }

    get current(): ServerState {
        return this.state;
    }

    update(event: ServerEvent, detail?: string): void {
        this.state = transition(this.state, event);
        this.render(detail);
    }

    private render(detail?: string): void {
        const p = present(this.state, detail);
        this.item.text = p.text;
        this.item.tooltip = p.tooltip;
        this.item.backgroundColor = p.error ? new vscode.ThemeColor('statusBarItem.errorBackground') : undefined;
    }

    dispose(): void {
        this.item.dispose();
    }
}
