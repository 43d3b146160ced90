/**
 * The editor commands that run the server's compiler commands on the active document.
 *
 * They call `workspace/executeCommand` themselves (rather than the VS Code commands the
 * language client registers for the server's commands) so that they get the answer back
 * and can show it: lowered CUDA in a side editor, reports as Markdown, tactics in a quick
 * pick. Every server command gets one object argument, `{uri, ...}`.
 */

import * as vscode from 'vscode';
import { ExecuteCommandRequest, type LanguageClient, type WorkspaceEdit } from 'vscode-languageclient/node';

import { LANGUAGE_ID } from './clientOptions';
import { commandErrorMessage, costReport, isWorkspaceEdit, loweredCuda, tacticChoices } from './core/results';

type ClientGetter = () => LanguageClient | undefined;

export function registerCommands(context: vscode.ExtensionContext, getClient: ClientGetter): void {
    const run = (server: string, title: string, show: (result: unknown, doc: vscode.TextDocument) => Thenable<unknown>,
        extra?: (editor: vscode.TextEditor) => Record<string, unknown>) => async () => {
        const editor = activeCakeEditor();
        const client = getClient();
        if (editor === undefined || client === undefined) {
            return;
        }
        const result = await execute(client, server, title, { uri: editor.document.uri.toString(), ...extra?.(editor) });
        if (result !== failed) {
            await show(result, editor.document);
        }
    };
    context.subscriptions.push(
        vscode.commands.registerCommand('cake.showLoweredCuda', run('cake.lower', 'Lowering to CUDA', showCuda)),
        vscode.commands.registerCommand('cake.showCostReport', run('cake.cost', 'Estimating cost',
            (r) => showMarkdown(costReport(r)))),
        vscode.commands.registerCommand('cake.simulateKernel', run('cake.simulate', 'Simulating',
            (r) => showMarkdown(costReport(r).replace('# CAKE cost report', '# CAKE simulation')))),
        vscode.commands.registerCommand('cake.pickTactic', () => pickTactic(getClient())),
    );
}

const failed = Symbol('failed');

function activeCakeEditor(): vscode.TextEditor | undefined {
    const editor = vscode.window.activeTextEditor;
    if (editor === undefined || editor.document.languageId !== LANGUAGE_ID) {
        void vscode.window.showInformationMessage('CAKE: open a .cake file first.');
        return undefined;
    }
    return editor;
}

async function execute(client: LanguageClient, command: string, title: string,
    argument: Record<string, unknown>): Promise<unknown> {
    return vscode.window.withProgress(
        { location: vscode.ProgressLocation.Notification, title: `CAKE: ${title}…`, cancellable: true },
        async (_progress, token) => {
            try {
                return await client.sendRequest(ExecuteCommandRequest.type, { command, arguments: [argument] }, token);
            } catch (e) {
                if (!token.isCancellationRequested) {
                    void vscode.window.showErrorMessage(commandErrorMessage(command, e));
                }
                return failed;
            }
        });
}

async function showCuda(result: unknown): Promise<void> {
    let cuda: string;
    try {
        cuda = loweredCuda(result);
    } catch (e) {
        void vscode.window.showErrorMessage(commandErrorMessage('cake.lower', e));
        return;
    }
    const doc = await vscode.workspace.openTextDocument({ language: 'cuda-cpp', content: cuda });
    await vscode.window.showTextDocument(doc, { viewColumn: vscode.ViewColumn.Beside, preview: true, preserveFocus: true });
}

async function showMarkdown(markdown: string): Promise<void> {
    const doc = await vscode.workspace.openTextDocument({ language: 'markdown', content: markdown });
    try {
        await vscode.commands.executeCommand('markdown.showPreviewToSide', doc.uri);
    } catch {
        await vscode.window.showTextDocument(doc, { viewColumn: vscode.ViewColumn.Beside, preview: true });
    }
}

async function pickTactic(client: LanguageClient | undefined): Promise<void> {
    const editor = activeCakeEditor();
    if (editor === undefined || client === undefined) {
        return;
    }
    const uri = editor.document.uri.toString();
    const position = client.code2ProtocolConverter.asPosition(editor.selection.active);
    const offered = await execute(client, 'cake.applyTactic', 'Finding tactics', { uri, position });
    if (offered === failed) {
        return;
    }
    const choices = tacticChoices(offered);
    if (choices.length === 0) {
        void vscode.window.showInformationMessage('CAKE: no tactic applies here.');
        return;
    }
    const picked = await vscode.window.showQuickPick(choices, { placeHolder: 'Tactic to apply' });
    if (picked === undefined) {
        return;
    }
    const result = await execute(client, 'cake.applyTactic', `Applying ${picked.label}`,
        { uri, position, tactic: picked.id });
    if (result !== failed && isWorkspaceEdit(result)) {
        const edit = await client.protocol2CodeConverter.asWorkspaceEdit(result as WorkspaceEdit);
        if (!await vscode.workspace.applyEdit(edit)) {
            void vscode.window.showErrorMessage(`CAKE: the edit of ${picked.label} could not be applied.`);
        }
    }
}
