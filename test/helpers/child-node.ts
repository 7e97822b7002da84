// A script run in a fresh node, for what only a separate process shows: which modules an import loads, and
// whether a host with nothing left to do exits by itself.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface ChildRun {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

export interface ChildOptions {
  /** Working directory: the repository root lets a script import the package by name (its exports map). */
  cwd?: string;
  /** Environment; default: only PATH, so no setting of this process leaks in. */
  env?: NodeJS.ProcessEnv;
  /** Extra node flags before the script (a loader, a hook). */
  nodeArgs?: string[];
  /** Only for a hung child: it is killed then, so a failure ends the test instead of stalling it. */
  deadlineMs?: number;
}

/** Runs `script` as an ES module (`node --input-type=module -e`) to its end. */
export async function runModuleScript(script: string, o: ChildOptions = {}): Promise<ChildRun> {
  const child = spawn(process.execPath, [...(o.nodeArgs ?? []), '--input-type=module', '-e', script], {
    cwd: o.cwd,
    env: o.env ?? { PATH: process.env.PATH },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const deadline = setTimeout(() => child.kill('SIGKILL'), o.deadlineMs ?? 60_000);
  const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve) => child.once('close', (c, s) => resolve([c, s])));
  clearTimeout(deadline);
  return { code, signal, stdout, stderr };
}

const HOOKS = `
import { appendFileSync } from 'node:fs';
export async function resolve(specifier, context, next) {
  const r = await next(specifier, context);
  appendFileSync(process.env.GOV_TEST_LOADED_LOG, r.url + '\\n');
  return r;
}`;
const REGISTER = `import { register } from 'node:module'; register(${JSON.stringify(`data:text/javascript,${encodeURIComponent(HOOKS)}`)});`;

export interface ModuleProbe {
  loaded: string[];
  stderr: string;
  code: number | null;
}

/**
 * Runs `body` (an ES module) in a fresh node, so nothing another test loaded counts, and returns every
 * module it loaded, recorded two ways: an ESM resolve hook (import statements, dynamic imports) and the
 * CommonJS cache (require() inside CommonJS packages, which ESM hooks do not see in Node 20).
 */
export async function probeModules(body: string, o: ChildOptions = {}): Promise<ModuleProbe> {
  const dir = mkdtempSync(join(tmpdir(), 'gov-module-probe-'));
  const log = join(dir, 'loaded.txt');
  const script = `${body}
import { createRequire } from 'node:module';
import { appendFileSync } from 'node:fs';
appendFileSync(process.env.GOV_TEST_LOADED_LOG, Object.keys(createRequire(import.meta.url).cache).join('\\n') + '\\n');`;
  const run = await runModuleScript(script, {
    ...o,
    env: { ...(o.env ?? { PATH: process.env.PATH }), GOV_TEST_LOADED_LOG: log },
    nodeArgs: [...(o.nodeArgs ?? []), '--import', `data:text/javascript,${encodeURIComponent(REGISTER)}`],
  });
  let loaded: string[] = [];
  try {
    loaded = readFileSync(log, 'utf8').split('\n').filter(Boolean);
  } catch {
    // nothing loaded at all: the callers' assertions say so
  }
  rmSync(dir, { recursive: true, force: true });
  return { loaded, stderr: run.stderr, code: run.code };
}
