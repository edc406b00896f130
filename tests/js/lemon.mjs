// Starting and stopping `1bit lemonade` for the JS suites: a real server process on a free port,
// the shipped models plus a random-weight second model, a private state directory.
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, mkdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export const bin = process.env.ONEBIT_BIN;
export const source = process.env.ONEBIT_SOURCE;
if (!bin || !source) throw new Error('set ONEBIT_BIN and ONEBIT_SOURCE (ctest does)');

export async function startLemonade(extraArgs = []) {
  const dir = mkdtempSync(join(tmpdir(), '1bit-js-'));
  mkdirSync(join(dir, 'extra'));
  execFileSync(bin, ['synth', '--like', 'tiny-llama', '-o', join(dir, 'extra', 'synth-llama.gguf')], { stdio: 'ignore' });
  const proc = spawn(bin, ['lemonade', '--port', '0', '--models-dir', join(source, 'models'), '--extra-models-dir',
                           join(dir, 'extra'), '--state-dir', join(dir, 'state'), ...extraArgs],
                     { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  const port = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('lemonade did not start: ' + stderr)), 15000);
    proc.stderr.on('data', (d) => {
      stderr += d;
      const m = stderr.match(/listening on http:\/\/127\.0\.0\.1:(\d+)/);
      if (m) { clearTimeout(timer); resolve(Number(m[1])); }
    });
    proc.on('exit', (code) => reject(new Error(`lemonade exited with ${code}: ${stderr}`)));
  });
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
      const exited = new Promise((r) => proc.once('exit', r));
      proc.kill('SIGTERM');
      await exited;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
