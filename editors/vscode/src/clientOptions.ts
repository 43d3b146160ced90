/**
 * The language client's options, shared by the VS Code extension and the browser client
 * (monaco-languageclient runs the same vscode-languageclient code against the VS Code API
 * of @codingame/monaco-vscode-api), so the browser end-to-end test exercises exactly the
 * settings filtering, initialization options and crash handling that VS Code users get.
 *
 * Nothing here may import Node.js modules: it is bundled for the browser too.
 */

import * as vscode from 'vscode';
import { CloseAction, ErrorAction } from 'vscode-languageclient/lib/common/api';
import type {
    CloseHandlerResult,
    ErrorHandler,
    ErrorHandlerResult,
    LanguageClientOptions,
} from 'vscode-languageclient/lib/common/api';

import { RestartPolicy, type RestartDecision } from './core/restartPolicy';
import { filterConfigurationResult, initializationOptions } from './core/settings';

export const LANGUAGE_ID = 'cake';
export const CLIENT_ID = 'cake';
export const CLIENT_NAME = 'CAKE Language Server';

export interface ClientHooks {
    /** Called on every crash with what the restart policy decided. */
    onCrash?(decision: RestartDecision): void;
    outputChannel?: vscode.OutputChannel;
}

/** Restarts a crashed server as the policy allows; reports each decision to `onCrash`. */
export function crashHandler(policy: RestartPolicy, hooks: ClientHooks): ErrorHandler {
    return {
        error(_error: Error, _message: unknown, count: number | undefined): ErrorHandlerResult {
            // A few broken messages in a row can happen while the process dies; more is fatal.
            return { action: count !== undefined && count <= 3 ? ErrorAction.Continue : ErrorAction.Shutdown };
        },
        closed(): CloseHandlerResult {
            const decision = policy.onCrash();
            hooks.onCrash?.(decision);
            return {
                action: decision.restart ? CloseAction.Restart : CloseAction.DoNotRestart,
                message: decision.message,
                handled: true,
            };
        },
    };
}

/** The `cake` section as VS Code's configuration holds it (defaults included). */
export function rawCakeSection(scope?: vscode.ConfigurationScope): Record<string, unknown> {
    const config = vscode.workspace.getConfiguration('cake', scope);
    return {
        python: config.get('python'),
        serverPath: config.get('serverPath'),
        arch: config.get('arch'),
        plugins: { disabled: config.get('plugins.disabled') },
        simulateOnSave: config.get('simulateOnSave'),
        nvccPath: config.get('nvccPath'),
    };
}

export function createClientOptions(policy: RestartPolicy, hooks: ClientHooks = {}): LanguageClientOptions {
    return {
        documentSelector: [
            { scheme: 'file', language: LANGUAGE_ID },
            { scheme: 'untitled', language: LANGUAGE_ID },
        ],
        // The server pulls its settings (workspace/configuration); this makes the client
        // tell it when they change.
        synchronize: { configurationSection: 'cake' },
        initializationOptions: () => initializationOptions(rawCakeSection()),
        errorHandler: crashHandler(policy, hooks),
        outputChannel: hooks.outputChannel,
        middleware: {
            workspace: {
                configuration: async (params, token, next) => {
                    const values = await next(params, token);
                    if (!Array.isArray(values)) {
                        return values;
                    }
                    return filterConfigurationResult(params.items, values);
                },
            },
        },
    };
}
