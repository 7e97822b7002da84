import { getHeapStatistics } from 'node:v8';
import { isMainThread, resourceLimits } from 'node:worker_threads';
import { LAUNCHER_SIZED_ENV } from '../config/heap-limits.js';
import { loadSettings } from '../config/settings.js';
import { composeSidecar } from '../compose/sidecar.js';
import { handOverGeneratedToken } from './generated-token.js';
import { releaseStartupPages } from '../runtime/startup-pages.js';
import type { ShutdownLog } from './signals.js';

/** `true` in the sidecar's bundle (build/sidecar-bundle.ts defines it); undeclared in dist/'s modules. */
declare const GOV_SIDECAR_BUNDLE: boolean;
const CODE = typeof GOV_SIDECAR_BUNDLE !== 'undefined' && GOV_SIDECAR_BUNDLE ? 'bundle' : 'modules';

export interface ServingSidecar {
  log: ShutdownLog;
  /** Drains both ports and commits the ledger (SIGTERM). */
  close(): Promise<void>;
}

/** Loads the settings, composes the sidecar, binds both ports and prints the listening lines. */
export async function serveSidecar(): Promise<ServingSidecar> {
  const settings = loadSettings('sidecar');
  const sc = await composeSidecar(settings);
  let tokenLine: string | null = null;
  let urls: { proxyUrl: string; apiUrl: string };
  try {
    // Before listening, so that the token file is there once the ports answer.
    if (sc.composed.tokenGenerated) tokenLine = handOverGeneratedToken(settings, sc.composed.token!);
    urls = await sc.listen();
  } catch (e) {
    // The error that stopped the start is the one to report, not one from closing half-started parts.
    await sc.close().catch(() => undefined);
    throw e;
  }
  const { proxyUrl, apiUrl } = urls;
  const log = sc.composed.logger;
  // Once both ports listen, start-up is over: what it alone touched can go (runtime/startup-pages.ts).
  const released = settings.proxy?.releaseStartupPages === false ? null : await releaseStartupPages();
  log.info(
    { proxy: proxyUrl, api: apiUrl, routes: sc.routes.routes.map((r) => r.prefix), escalate: settings.proxy?.escalate, source: settings.sourceId, code: CODE, heap: heapReport(), startup_pages_released_kb: released?.kb ?? null },
    'gov sidecar listening',
  );
  process.stdout.write(`gov sidecar listening on ${apiUrl}\ngov sidecar proxy listening on ${proxyUrl}\n`);
  if (tokenLine !== null) process.stdout.write(tokenLine);
  return { log, close: () => sc.close() };
}

/** The V8 limits this sidecar runs under, as logged at start (and read by test/cli/sidecar-thread.test.ts). */
function heapReport(): { thread: boolean; sized_by: 'thread' | 'launcher' | 'node'; max_old_generation_mb?: number; max_young_generation_mb?: number; heap_size_limit_mb: number } {
  const limit = Math.round(getHeapStatistics().heap_size_limit / (1024 * 1024));
  if (isMainThread) return { thread: false, sized_by: process.env[LAUNCHER_SIZED_ENV] === '1' ? 'launcher' : 'node', heap_size_limit_mb: limit };
  return { thread: true, sized_by: 'thread', max_old_generation_mb: resourceLimits.maxOldGenerationSizeMb, max_young_generation_mb: resourceLimits.maxYoungGenerationSizeMb, heap_size_limit_mb: limit };
}
