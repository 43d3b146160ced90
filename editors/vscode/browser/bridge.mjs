// Serves the built browser client (browser/dist) and connects each WebSocket on /lsp to a
// fresh `cake lsp` over stdio. Every LSP message goes to the browser as one TEXT frame of
// JSON (browser clients reject binary frames); each frame from the browser is one message.
//
//   node browser/bridge.mjs [--port 8080] [--kernel FILE]     # then open http://127.0.0.1:8080/
//
// The server is started as `$CAKE_PYTHON -m cake lsp` (CAKE_PYTHON defaults to the
// repository's .venv/bin/python when it exists, else python3).
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import { dirname, extname, join, normalize, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

import { StreamMessageReader, StreamMessageWriter } from 'vscode-jsonrpc/node.js';
import { WebSocketServer } from 'ws';

const here = dirname(fileURLToPath(import.meta.url));
const repo = resolve(here, '..', '..', '..');
export const SAMPLE_KERNEL = join(repo, 'tests', 'lsp', 'data', 'gemm.cake');

const TYPES = {
    '.html': 'text/html; charset=utf-8', '.js': 'text/javascript', '.mjs': 'text/javascript',
    '.css': 'text/css', '.json': 'application/json', '.wasm': 'application/wasm',
    '.svg': 'image/svg+xml', '.png': 'image/png', '.ttf': 'font/ttf', '.woff': 'font/woff',
    '.woff2': 'font/woff2', '.mp3': 'audio/mpeg', '.cake': 'text/plain; charset=utf-8',
};

export function defaultServerCommand() {
    const venv = join(repo, '.venv', 'bin', 'python');
    const python = process.env.CAKE_PYTHON || (existsSync(venv) ? venv : 'python3');
    return { command: python, args: ['-m', 'cake', 'lsp'] };
}

/**
 * Starts the bridge; resolves to { url, close, messages }. `messages` records every message
 * with its direction ('client' or 'server') when `record` is set, for tests to inspect.
 */
export async function startBridge({
    port = 0, host = '127.0.0.1', distDir = join(here, 'dist'), kernelFile = SAMPLE_KERNEL,
    server = defaultServerCommand(), record = false, log = (line) => process.stderr.write(`${line}\n`),
} = {}) {
    const root = resolve(distDir);
    const messages = [];
    const children = new Set();

    const http = createServer(async (req, res) => {
        const path = decodeURIComponent(new URL(req.url, 'http://x').pathname);
        if (path === '/kernel.cake') {
            res.writeHead(200, { 'content-type': TYPES['.cake'], 'cache-control': 'no-store' });
            res.end(readFileSync(kernelFile));
            return;
        }
        const file = normalize(join(root, path === '/' ? 'index.html' : path));
        if (file !== root && !file.startsWith(root + sep)) {
            res.writeHead(403).end();
            return;
        }
        try {
            const body = await readFile(file);
            res.writeHead(200, { 'content-type': TYPES[extname(file)] ?? 'application/octet-stream' });
            res.end(body);
        } catch {
            res.writeHead(404).end();
        }
    });

    const wss = new WebSocketServer({ server: http, path: '/lsp' });
    wss.on('connection', (ws) => {
        const child = spawn(server.command, server.args, { stdio: ['pipe', 'pipe', 'pipe'] });
        children.add(child);
        log(`bridge: started ${server.command} ${server.args.join(' ')} (pid ${child.pid})`);
        child.stderr.on('data', (chunk) => log(`cake lsp: ${String(chunk).trimEnd()}`));
        child.on('error', (e) => { log(`bridge: cannot start the server: ${e.message}`); ws.close(1011); });
        child.on('exit', (code, signal) => {
            children.delete(child);
            log(`bridge: server exited (${signal ?? code})`);
            ws.close();
        });
        const reader = new StreamMessageReader(child.stdout);
        const writer = new StreamMessageWriter(child.stdin);
        reader.listen((message) => {
            if (record) messages.push({ from: 'server', message });
            if (ws.readyState === ws.OPEN) ws.send(JSON.stringify(message)); // a string: a TEXT frame
        });
        ws.on('message', (data, isBinary) => {
            let message;
            try {
                message = JSON.parse(isBinary ? Buffer.from(data).toString('utf8') : String(data));
            } catch (e) {
                log(`bridge: dropped a frame that is not JSON: ${e.message}`);
                return;
            }
            if (record) messages.push({ from: 'client', message });
            void writer.write(message);
        });
        ws.on('close', () => {
            if (child.exitCode === null) child.kill();
        });
    });

    await new Promise((ok, fail) => { http.once('error', fail); http.listen(port, host, ok); });
    const address = http.address();
    const url = `http://${host}:${address.port}/`;
    const close = async () => {
        for (const child of children) child.kill();
        for (const client of wss.clients) client.terminate();
        await new Promise((ok) => wss.close(() => ok()));
        await new Promise((ok) => http.close(() => ok()));
    };
    return { url, close, messages };
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
    const arg = (name, fallback) => {
        const i = process.argv.indexOf(name);
        return i > 0 ? process.argv[i + 1] : fallback;
    };
    const bridge = await startBridge({ port: Number(arg('--port', '8080')), kernelFile: arg('--kernel', SAMPLE_KERNEL) });
    process.stderr.write(`bridge: open ${bridge.url}\n`);
}
