import { existsSync, writeSync } from 'node:fs';
import { Worker } from 'node:worker_threads';
import { applySidecarV8Flags, LAUNCHER_SIZED_ENV, sidecarHeapLimits } from '../config/heap-limits.js';
import { onSignals } from './signals.js';

/** The message the main thread sends the sidecar's thread on SIGTERM/SIGINT. */
export const SIDECAR_STOP = 'gov.sidecar.stop';
export interface SidecarStop {
  type: typeof SIDECAR_STOP;
  signal: NodeJS.Signals;
}

/**
 * Where the sidecar's code comes from: the bundle `npm run build` writes (build/sidecar-bundle.ts says why),
 * or, when running from src/ (tests) or from a dist/ compiled without it, the modules themselves.
 */
function sidecarModule(name: 'sidecar-thread' | 'sidecar-serve'): URL {
  if (import.meta.url.endsWith('.ts')) return new URL(`./${name}.ts`, import.meta.url);
  const bundled = new URL(`../sidecar-bundle/${name}.js`, import.meta.url);
  return existsSync(bundled) ? bundled : new URL(`./${name}.js`, import.meta.url);
}

/**
 * `gov sidecar`. By default the sidecar runs in a worker thread whose V8 heap is capped from the container's
 * memory limit (config/heap-limits.ts): Node's own sizing let the young generation alone take ~48 MB, and
 * V8 takes its sizing only when an isolate is created, so a process cannot shrink its own heap after
 * start. The main thread loads nothing of the sidecar (its isolate stays at a few MB), forwards signals,
 * and exits with the thread's exit code. The `gov` launcher (cli/main.ts's shell preamble) starts node
 * with the same sizing as flags instead, and then the sidecar serves on the main thread: one isolate less,
 * ~8 MB (docs/performance.md, "Session 17"). GOV_SIDECAR_HEAP_MB=0 serves on the main thread with Node's
 * own sizing.
 */
export async function runSidecar(): Promise<void> {
  // Started by the `gov` launcher with sidecarNodeFlags(): this isolate is already sized.
  const limits = process.env[LAUNCHER_SIZED_ENV] === '1' ? null : sidecarHeapLimits(process.env);
  applySidecarV8Flags();
  if (limits === null) {
    const { serveSidecar } = (await import(sidecarModule('sidecar-serve').href)) as typeof import('./sidecar-serve.js');
    const { log, close } = await serveSidecar();
    onSignals(log, close);
    return;
  }
  const thread = new Worker(sidecarModule('sidecar-thread'), { resourceLimits: limits });
  let stopping = false;
  const stop = (signal: NodeJS.Signals) => {
    if (stopping) return;
    stopping = true;
    thread.postMessage({ type: SIDECAR_STOP, signal } satisfies SidecarStop);
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
  thread.on('error', (e: Error & { code?: string }) => {
    // ERR_WORKER_OUT_OF_MEMORY: live data outgrew maxOldGenerationSizeMb (GOV_SIDECAR_HEAP_MB).
    const hint = e.code === 'ERR_WORKER_OUT_OF_MEMORY' ? ` (V8 old generation capped at ${limits.maxOldGenerationSizeMb} MB: raise GOV_SIDECAR_HEAP_MB or the container's memory limit)` : '';
    writeSync(2, `gov: the sidecar thread failed: ${e.stack ?? e.message}${hint}\n`);
  });
  thread.on('exit', (code) => process.exit(code));
}
