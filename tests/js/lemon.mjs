// Starting and stopping 1bit for the JS suites: `1bit serve` on a model, and `1bit lemonade` with
// the shipped models plus a random-weight second model and a private state directory; each a
// real server process on a free port.
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, mkdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export const bin = process.env.ONEBIT_BIN;
export const source = process.env.ONEBIT_SOURCE;
if (!bin || !source) throw new Error('set ONEBIT_BIN and ONEBIT_SOURCE (ctest does)');

// Starts `1bit <args>` and resolves with the process and its port once stderr shows `ready`.
async function startOnebit(args, ready) {
  const proc = spawn(bin, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  const port = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`1bit ${args[0]} did not start: ${stderr}`)), 60000);
    proc.stderr.on('data', (d) => {
      stderr += d;
      const m = stderr.match(ready);
      if (m) { clearTimeout(timer); resolve(Number(m[1])); }
    });
    proc.on('exit', (code) => reject(new Error(`1bit ${args[0]} exited with ${code}: ${stderr}`)));
  });
  return { proc, port };
}

async function stopProcess(proc) {
  const exited = new Promise((r) => proc.once('exit', r));
  proc.kill('SIGTERM');
  await exited;
}

// `1bit serve` on a free port, once its engine is ready.
export async function startServe(args) {
  const { proc, port } = await startOnebit(['serve', '--port', '0', ...args], /ready on http:\/\/127\.0\.0\.1:(\d+)/);
  return { port, base: `http://127.0.0.1:${port}`, proc, stop: () => stopProcess(proc) };
}

export async function startLemonade(extraArgs = []) {
  const dir = mkdtempSync(join(tmpdir(), '1bit-js-'));
  mkdirSync(join(dir, 'extra'));
  execFileSync(bin, ['synth', '--like', 'tiny-llama', '-o', join(dir, 'extra', 'synth-llama.gguf')], { stdio: 'ignore' });
  const { proc, port } = await startOnebit(
      ['lemonade', '--port', '0', '--models-dir', join(source, 'models'), '--extra-models-dir', join(dir, 'extra'),
       '--state-dir', join(dir, 'state'), ...extraArgs],
      /listening on http:\/\/127\.0\.0\.1:(\d+)/);
  const base = `http://127.0.0.1:${port}`;
  return {
    port, base, proc,
    async get(path) { return (await fetch(base + path)).json(); },
    async post(path, body) {
      return (await fetch(base + path, { method: 'POST', headers: { 'Content-Type': 'application/json' },
                                         body: JSON.stringify(body) })).json();
    },
    async loaded() {
      const h = await (await fetch(base + '/api/v1/health')).json();
      return h.all_models_loaded.map((m) => m.model_name).sort();
    },
    async stop() {
      await stopProcess(proc);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
