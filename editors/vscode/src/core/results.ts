/**
 * Reading the answers of the server's commands (`workspace/executeCommand`).
 *
 * The commands are documented in docs/lsp.md; the readers accept the documented shape
 * and the obvious variants (a bare string, an object with the text under a common key),
 * so the editor keeps working while the compiler's answers grow new fields.
 */

/** JSON-RPC error code the server uses for "not available in this version". */
export const REQUEST_FAILED = -32803;

export interface ErrorLike { code?: unknown; message?: unknown }

/** Whether an error says the command exists but is not implemented by this server. */
export function isNotAvailable(error: unknown): boolean {
    const e = error as ErrorLike | null;
    return !!e && e.code === REQUEST_FAILED && typeof e.message === 'string'
        && /not available/i.test(e.message);
}

/** A message for a command that failed. */
export function commandErrorMessage(command: string, error: unknown): string {
    const e = error as ErrorLike | null;
    const message = e && typeof e.message === 'string' ? e.message : String(error);
    if (isNotAvailable(error)) {
        return `CAKE: ${message}. Update CAKE in the interpreter the extension uses (cake.python).`;
    }
    return `CAKE: ${command} failed: ${message}`;
}

function pick(result: unknown, keys: readonly string[]): string | undefined {
    if (typeof result === 'string') {
        return result;
    }
    if (result && typeof result === 'object') {
        for (const key of keys) {
            const value = (result as Record<string, unknown>)[key];
            if (typeof value === 'string') {
                return value;
            }
        }
    }
    return undefined;
}

/** The CUDA source out of a `cake.lower` answer. */
export function loweredCuda(result: unknown): string {
    const cuda = pick(result, ['cuda', 'source', 'text', 'code']);
    if (cuda === undefined) {
        throw new TypeError('cake.lower answered without CUDA source');
    }
    return cuda;
}

/** A Markdown report out of a `cake.cost` answer: its own Markdown, or the JSON shown as code. */
export function costReport(result: unknown): string {
    const md = pick(result, ['markdown', 'report', 'text']);
    if (md !== undefined) {
        return md;
    }
    return '# CAKE cost report\n\n```json\n' + JSON.stringify(result, null, 2) + '\n```\n';
}

export interface TacticChoice {
    /** What is sent back to the server to apply the tactic. */
    id: string;
    label: string;
    description?: string;
    detail?: string;
}

/**
 * The tactics the server offers, out of a `cake.applyTactic` answer given without a
 * tactic: a list, or an object holding the list under `tactics`. Each entry is a name or
 * an object with `name` (or `id`) and optional `title`, `description`, `detail`.
 */
export function tacticChoices(result: unknown): TacticChoice[] {
    const list = Array.isArray(result)
        ? result
        : result && typeof result === 'object' && Array.isArray((result as Record<string, unknown>).tactics)
            ? (result as Record<string, unknown>).tactics as unknown[]
            : [];
    const out: TacticChoice[] = [];
    for (const entry of list) {
        if (typeof entry === 'string') {
            out.push({ id: entry, label: entry });
        } else if (entry && typeof entry === 'object') {
            const e = entry as Record<string, unknown>;
            const id = typeof e.name === 'string' ? e.name : typeof e.id === 'string' ? e.id : undefined;
            if (id === undefined) {
                continue;
            }
            out.push({
                id,
                label: typeof e.title === 'string' ? e.title : id,
                description: typeof e.description === 'string' ? e.description : undefined,
                detail: typeof e.detail === 'string' ? e.detail : undefined,
            });
        }
    }
    return out;
}

/** Whether a command's answer is a workspace edit for the client to apply. */
export function isWorkspaceEdit(result: unknown): boolean {
    return !!result && typeof result === 'object'
        && ('changes' in (result as object) || 'documentChanges' in (result as object));
}
