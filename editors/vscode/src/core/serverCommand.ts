/**
 * How the client starts `cake lsp`.
 *
 * The server is pure Python on top of compiled tree-sitter wheels, so it cannot ship
 * inside the extension: it runs from the user's own environment. `cake.serverPath` names
 * a `cake` executable (run as `<path> lsp`); otherwise `cake.python` names the
 * interpreter that has CAKE installed (run as `<python> -m cake lsp`). With
 * neither set the default interpreter of the platform is used.
 */

import * as path from 'node:path';

import type { LaunchSettings } from './settings';

export interface ServerCommand {
    command: string;
    args: string[];
    /** How the command was chosen, for messages and the status bar tooltip. */
    origin: 'cake.serverPath' | 'cake.python' | 'default interpreter';
}

export interface LaunchContext {
    platform: NodeJS.Platform | string;
    /** The first workspace folder, for relative paths and `${workspaceFolder}`. */
    workspaceFolder?: string;
    home?: string;
    env?: Readonly<Record<string, string | undefined>>;
}

export const PYTHON_MODULE_ARGS: readonly string[] = ['-m', 'cake', 'lsp'];

export class LaunchError extends Error {}

/** The default interpreter: `python` on Windows (no `python3` there), `python3` elsewhere. */
export function defaultPython(platform: string): string {
    return platform === 'win32' ? 'python' : 'python3';
}

/**
 * `${workspaceFolder}`, `${userHome}`, `${env:NAME}` and a leading `~` expanded; a path
 * relative to the workspace (it has a separator but no root) made absolute.
 * A bare name such as `python3` is left for PATH lookup.
 */
export function expandPath(value: string, ctx: LaunchContext): string {
    let out = value.replace(/\$\{(workspaceFolder|userHome|env:([A-Za-z_][A-Za-z0-9_]*))\}/g,
        (whole: string, name: string, envName: string | undefined) => {
            if (envName !== undefined) {
                return ctx.env?.[envName] ?? '';
            }
            const replacement = name === 'workspaceFolder' ? ctx.workspaceFolder : ctx.home;
            if (replacement === undefined) {
                throw new LaunchError(`${whole} cannot be expanded in "${value}": `
                    + (name === 'workspaceFolder' ? 'no folder is open' : 'no home directory'));
            }
            return replacement;
        });
    if ((out === '~' || out.startsWith('~/')) && ctx.home !== undefined) {
        out = ctx.home + out.slice(1);
    }
    const p = ctx.platform === 'win32' ? path.win32 : path.posix;
    const hasSeparator = out.includes('/') || (ctx.platform === 'win32' && out.includes('\\'));
    if (hasSeparator && !p.isAbsolute(out) && ctx.workspaceFolder !== undefined) {
        out = p.join(ctx.workspaceFolder, out);
    }
    return out;
}

/** The command line for the server, from the launch settings. */
export function resolveServerCommand(settings: LaunchSettings, ctx: LaunchContext): ServerCommand {
    if (settings.serverPath !== '') {
        return { command: expandPath(settings.serverPath, ctx), args: ['lsp'], origin: 'cake.serverPath' };
    }
    if (settings.python !== '') {
        return { command: expandPath(settings.python, ctx), args: [...PYTHON_MODULE_ARGS], origin: 'cake.python' };
    }
    return { command: defaultPython(ctx.platform), args: [...PYTHON_MODULE_ARGS], origin: 'default interpreter' };
}

/** The command as a user would type it, for messages. */
export function describe(cmd: ServerCommand): string {
    const quote = (s: string): string => (/[\s"']/.test(s) ? JSON.stringify(s) : s);
    return [cmd.command, ...cmd.args].map(quote).join(' ');
}
