/**
 * The CAKE extension: starts `cake lsp`, shows its state, and offers the compiler's
 * commands (lowered CUDA, cost report, tactics, simulation).
 *
 * The decisions live in `core/` (pure, unit-tested without VS Code) and in
 * `clientOptions.ts` (shared with the browser client); this module wires them to VS Code.
 */

import * as os from 'node:os';

import * as vscode from 'vscode';
import { LanguageClient, State, type ServerOptions } from 'vscode-languageclient/node';

import { CLIENT_ID, CLIENT_NAME, createClientOptions, rawCakeSection } from './clientOptions';
import { registerCommands } from './commands';
import { RestartPolicy } from './core/restartPolicy';
import { describe, LaunchError, resolveServerCommand, type ServerCommand } from './core/serverCommand';
import { launchSettings, needsRestart } from './core/settings';
import { StatusItem } from './statusBar';

let controller: ServerController | undefined;

export async function activate(context: vscode.ExtensionContext): Promise<void> {
    controller = new ServerController();
    context.subscriptions.push(controller);
    registerCommands(context, () => controller?.client);
    context.subscriptions.push(
        vscode.commands.registerCommand('cake.restartServer', () => controller?.restart(true)),
        vscode.commands.registerCommand('cake.showOutput', () => controller?.output.show(true)),
        vscode.workspace.onDidChangeConfiguration((e) => {
            const changed = ['python', 'serverPath'].filter((k) => e.affectsConfiguration(`cake.${k}`));
            if (needsRestart(changed)) {
                void controller?.restart(true);
            }
        }),
    );
    await controller.start();
}

export async function deactivate(): Promise<void> {
    await controller?.stop();
    controller = undefined;
}

/** Owns the language client: starts, stops and restarts it, and keeps the status bar true. */
class ServerController implements vscode.Disposable {
    readonly output = vscode.window.createOutputChannel(CLIENT_NAME);
    readonly policy = new RestartPolicy();
    client: LanguageClient | undefined;
    private readonly status = new StatusItem();
    private stateListener: vscode.Disposable | undefined;

    private serverCommand(): ServerCommand {
        const folder = vscode.workspace.workspaceFolders?.[0];
        return resolveServerCommand(launchSettings(rawCakeSection()), {
            platform: process.platform,
            workspaceFolder: folder?.uri.scheme === 'file' ? folder.uri.fsPath : undefined,
            home: os.homedir(),
            env: process.env,
        });
    }

    async start(): Promise<void> {
        let cmd: ServerCommand;
        try {
            cmd = this.serverCommand();
        } catch (e) {
            this.failed(e instanceof LaunchError ? e.message : String(e));
            return;
        }
        this.status.update({ kind: 'start' }, describe(cmd));
        this.output.appendLine(`Starting ${describe(cmd)} (from ${cmd.origin})`);
        const serverOptions: ServerOptions = {
            command: cmd.command,
            args: cmd.args,
            options: { cwd: vscode.workspace.workspaceFolders?.[0]?.uri.fsPath },
        };
        const client = new LanguageClient(CLIENT_ID, CLIENT_NAME, serverOptions, createClientOptions(this.policy, {
            outputChannel: this.output,
            onCrash: (decision) => {
                this.status.update({ kind: 'crashed', willRestart: decision.restart }, decision.message);
                if (decision.restart) {
                    void vscode.window.showWarningMessage(decision.message);
                } else {
                    void vscode.window.showErrorMessage(decision.message, 'Show Output', 'Restart')
                        .then((choice) => this.onChoice(choice));
                }
            },
        }));
        this.client = client;
        this.stateListener?.dispose();
        this.stateListener = client.onDidChangeState((e) => {
            if (e.newState === State.Running) {
                this.status.update({ kind: 'running' }, describe(cmd));
            } else if (e.newState === State.Starting) {
                this.status.update({ kind: 'start' }, describe(cmd));
            } else {
                this.status.update({ kind: 'stopped' });
            }
        });
        try {
            await client.start();
        } catch (e) {
            this.failed(`Could not start the CAKE language server with \`${describe(cmd)}\`: `
                + `${e instanceof Error ? e.message : String(e)}. Set "cake.python" to an interpreter `
                + 'that has CAKE installed, or "cake.serverPath" to the `cake` executable.');
        }
    }

    private failed(message: string): void {
        this.status.update({ kind: 'startFailed' }, message);
        this.output.appendLine(message);
        void vscode.window.showErrorMessage(message, 'Open Settings', 'Show Output')
            .then((choice) => this.onChoice(choice));
    }

    private onChoice(choice: string | undefined): void {
        if (choice === 'Open Settings') {
            void vscode.commands.executeCommand('workbench.action.openSettings', 'cake.');
        } else if (choice === 'Show Output') {
            this.output.show(true);
        } else if (choice === 'Restart') {
            void this.restart(true);
        }
    }

    async stop(): Promise<void> {
        const client = this.client;
        this.client = undefined;
        this.stateListener?.dispose();
        if (client !== undefined && client.state !== State.Stopped) {
            try {
                await client.stop();
            } catch (e) {
                this.output.appendLine(`Stopping the server: ${String(e)}`);
            }
        }
        this.status.update({ kind: 'stopped' });
    }

    /** A restart the user asked for (or a launch setting changed): a fresh crash count. */
    async restart(resetPolicy: boolean): Promise<void> {
        if (resetPolicy) {
            this.policy.reset();
        }
        await this.stop();
        await this.start();
    }

    dispose(): void {
        void this.stop();
        this.status.dispose();
        this.output.dispose();
    }
}
