/**
 * The `cake.*` settings: which ones the language server reads and how they reach it.
 *
 * The server validates every key it receives and warns about unknown ones, so the client
 * must send it only the server's own settings (`arch`, `plugins.disabled`,
 * `simulateOnSave`, `nvccPath`), never the client-side ones that say how to start it
 * (`python`, `serverPath`, `trace.server`). Both `initializationOptions` and the answers to
 * `workspace/configuration` go through `serverSection`, so the two never disagree.
 */

/** The `cake` section as the server expects it (docs/lsp.md, "Settings"). */
export interface ServerSettings {
    arch: string | null;
    plugins: { disabled: string[] };
    simulateOnSave: boolean;
    nvccPath: string | null;
}

/** Settings that only the client uses: how to start the server. */
export interface LaunchSettings {
    python: string;
    serverPath: string;
}

/** Keys of the `cake` section whose change needs a new server process. */
export const LAUNCH_KEYS: readonly string[] = ['python', 'serverPath'];

/** Keys the server reads; a change reaches it through `workspace/didChangeConfiguration`. */
export const SERVER_KEYS: readonly string[] = ['arch', 'plugins', 'simulateOnSave', 'nvccPath'];

type Raw = Readonly<Record<string, unknown>> | null | undefined;

/** A string setting where blank means unset; a value of another kind passes through. */
function optionalText(value: unknown): string | null {
    if (value === undefined || value === null) {
        return null;
    }
    return typeof value === 'string' ? text(value) : value as string;
}

function text(value: unknown): string | null {
    return typeof value === 'string' && value.trim() !== '' ? value.trim() : null;
}

/**
 * The server's part of a raw `cake` section (what `workspace.getConfiguration('cake')`
 * holds, or the object under `"cake"`).
 *
 * Empty strings mean "not set" (VS Code's settings editor cannot write null). Values of
 * the wrong kind are passed through unchanged so that the server, which owns the rules,
 * reports them to the user instead of the client hiding a typo.
 */
export function serverSection(raw: Raw): ServerSettings {
    const section: Raw = raw && typeof raw.cake === 'object' && raw.cake !== null
        ? raw.cake as Record<string, unknown>
        : raw;
    const get = (key: string): unknown => (section ? section[key] : undefined);
    const plugins = get('plugins');
    const disabled = plugins && typeof plugins === 'object'
        ? (plugins as Record<string, unknown>).disabled
        : undefined;
    const arch = get('arch');
    const nvcc = get('nvccPath');
    const simulate = get('simulateOnSave');
    return {
        arch: optionalText(arch),
        plugins: { disabled: disabled === undefined || disabled === null ? [] : disabled as string[] },
        simulateOnSave: simulate === undefined || simulate === null ? false : simulate as boolean,
        nvccPath: optionalText(nvcc),
    };
}

/** What the client sends as `initializationOptions`: the server section under `cake`. */
export function initializationOptions(raw: Raw): { cake: ServerSettings } {
    return { cake: serverSection(raw) };
}

/**
 * Rewrites the client's answer to a `workspace/configuration` request: every item that
 * asks for the `cake` section gets only the server's keys; other items pass unchanged.
 */
export function filterConfigurationResult(
    items: ReadonlyArray<{ section?: string }>,
    values: readonly unknown[],
): unknown[] {
    return values.map((value, i) => {
        const section = items[i]?.section;
        if (section === 'cake') {
            return serverSection(value as Raw);
        }
        if (section !== undefined && section.startsWith('cake.')) {
            const key = section.slice('cake.'.length).split('.')[0];
            return SERVER_KEYS.includes(key) ? value : null;
        }
        return value;
    });
}

/** The client's launch settings out of a raw `cake` section. */
export function launchSettings(raw: Raw): LaunchSettings {
    return {
        python: text(raw?.python) ?? '',
        serverPath: text(raw?.serverPath) ?? '',
    };
}

/** Whether a change of these `cake.*` keys needs a restart of the server process. */
export function needsRestart(changedKeys: readonly string[]): boolean {
    return changedKeys.some((key) => LAUNCH_KEYS.includes(key.replace(/^cake\./, '')));
}
