import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Test } from 'tap';
import { SETTING_DOCS } from '../../src/config/settings.js';

/** The built CLI (`npm test` runs `prepare`, which compiles dist/ first). */
export const CLI = fileURLToPath(new URL('../../dist/cli/main.js', import.meta.url));

/** Ports this process handed out: two servers started side by side must not be given the same one. */
const handedOut = new Set<number>();

/**
 * A port nobody listens on right now, and not handed out before by this process: bind port 0, read it,
 * close. The kernel may give a port just closed again, so tests that start two servers at once (a fleet of
 * sidecars) could otherwise both be told to listen on it.
 */
export async function freePort(): Promise<number> {
  for (;;) {
    const port = await boundZero();
    if (!handedOut.has(port)) {
      handedOut.add(port);
      return port;
    }
  }
}

function boundZero(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface GovProcess {
  child: ChildProcessWithoutNullStreams;
  /** Base address from the `gov <mode> listening on http://...` line. */
  url: string;
  stdout(): string;
  stderr(): string;
  exited: Promise<Exit>;
  /** SIGKILL it if it is still running, and wait for the exit. */
  kill(): Promise<Exit>;
}

/**
 * The command and arguments that run `node <args>` as the image runs it. tap puts its process-info loader
 * (@tapjs/processinfo) into the NODE_OPTIONS of every process a test spawns, whatever env the test passes.
 * The loader turns source maps on, and the first stack trace a sidecar then formats parses its bundle's map:
 * ~32 MB more live heap in the sidecar thread, where the 64 MB old generation then ran out at shutdown
 * (docs/performance.md, "Session 38"). `env -u NODE_OPTIONS` drops it between the spawn and node.
 */
export function asShipped(args: string[]): [string, string[]] {
  return ['env', ['-u', 'NODE_OPTIONS', process.execPath, ...args]];
}

/**
 * `env` for dist/cli/main.js run as a program (the `gov` launcher, as the image's entrypoint and npm's bin
 * run it): its shell preamble execs the node on PATH, this test's node first.
 */
export function launcherEnv(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  return { ...env, PATH: `${dirname(process.execPath)}:${env.PATH ?? ''}` };
}

/**
 * Runs `node dist/cli/main.js <args>` to completion (bounded by timeoutMs, then SIGKILL); with `launcher`,
 * dist/cli/main.js itself as a program.
 */
export async function runCli(args: string[], env: NodeJS.ProcessEnv = process.env, timeoutMs = 15_000, how: 'node' | 'launcher' = 'node'): Promise<Exit & { stdout: string; stderr: string }> {
  const child = how === 'node'
    ? spawn(process.execPath, [CLI, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] })
    : spawn(CLI, args, { env: launcherEnv(env), stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  const exit = await new Promise<Exit>((resolve) => child.once('close', (code, signal) => resolve({ code, signal })));
  clearTimeout(timer);
  return { ...exit, stdout, stderr };
}

/** Spawns `gov <mode>` and resolves once it prints its listening line; rejects if it exits first or times out. */
export async function startGovProcess(mode: 'embedded' | 'gateway' | 'sidecar', env: NodeJS.ProcessEnv, timeoutMs = 15_000): Promise<GovProcess> {
  const child = spawn(...asShipped([CLI, mode]), { env, stdio: ['pipe', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout.on('data', (d: Buffer) => {
    out += d.toString();
  });
  child.stderr.on('data', (d: Buffer) => {
    err = (err + d.toString()).slice(-50_000);
  });
  const exited = new Promise<Exit>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  const pattern = new RegExp(`gov ${mode} listening on (http://\\S+)`);
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`gov ${mode} did not print its listening line within ${timeoutMs} ms; stderr: ${err.slice(-2000)}`));
    }, timeoutMs);
    const onData = () => {
      const m = pattern.exec(out);
      if (m) {
        clearTimeout(timer);
        child.stdout.off('data', onData);
        resolve(m[1]);
      }
    };
    child.stdout.on('data', onData);
    void exited.then(({ code, signal }) => {
      clearTimeout(timer);
      reject(new Error(`gov ${mode} exited before listening (code ${code}, signal ${signal}); stderr: ${err.slice(-2000)}`));
    });
  });
  return {
    child,
    url,
    stdout: () => out,
    stderr: () => err,
    exited,
    async kill() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      return exited;
    },
  };
}

/**
 * `gov gateway` processes sharing `env` (one Redis, one database...), one per name, each with its own port,
 * LMDB directory and source id (`gateway-<name>`), in test mode without the policy watch; the parent's gov
 * settings never leak in. Killed, and their directories removed, when `t` ends.
 */
export async function startGatewayProcesses(t: Test, names: string[], env: Record<string, string>): Promise<GovProcess[]> {
  const dir = mkdtempSync(join(tmpdir(), 'gov-procs-'));
  const procs: GovProcess[] = [];
  t.teardown(async () => {
    for (const p of procs) await p.kill();
    rmSync(dir, { recursive: true, force: true });
  });
  const base: NodeJS.ProcessEnv = { ...process.env };
  for (const d of SETTING_DOCS) delete base[d.name];
  for (const name of names) {
    procs.push(await startGovProcess('gateway', {
      ...base,
      GOV_ENV: 'test',
      GOV_PORT: String(await freePort()),
      GOV_DB_PATH: join(dir, name),
      GOV_SOURCE_ID: `gateway-${name}`,
      GOV_POLICY_WATCH: 'false',
      ...env,
    }));
  }
  return procs;
}

export interface JsonResponse {
  status: number;
  headers: Headers;
  body: any;
  text: string;
}

export async function httpJson(url: string, init: RequestInit = {}): Promise<JsonResponse> {
  const res = await fetch(url, { signal: AbortSignal.timeout(15_000), ...init });
  const text = await res.text();
  let body: unknown;
  try {
    body = text.length ? JSON.parse(text) : undefined;
  } catch {
    body = undefined;
  }
  return { status: res.status, headers: res.headers, body, text };
}
