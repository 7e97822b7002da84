import { createSyncFn } from 'synckit';
import { GatewayUnavailableError } from '../contracts/client-errors.js';
import type { ClientSettings } from './client-settings.js';
import { inProcessGateways } from './in-process-gateways.js';
import { localSend, type Phase, type PhaseTypes } from './gov-client.js';
import { rebuildError, type WorkerClientOptions, type WorkerRequest, type WorkerResponse } from './sync-wire.js';

/**
 * Governance calls for a synchronous governed function: the caller's thread blocks (synckit: Atomics.wait
 * on a SharedArrayBuffer, the answer read with receiveMessageOnPort) while a worker thread makes the HTTP
 * call with the client's own transport (sync-worker.ts). The worker starts on the first call that needs
 * the network and is unreferenced by synckit, so it never keeps the host process alive. The wait is
 * bounded by the transport itself: timeoutMs per attempt for each of connecting, the headers and any
 * pause in the body (undici's timers, up to a second late), retries + 1 attempts.
 */

/**
 * The compiled worker beside this module. Run from the TypeScript sources (the test runner's loader), this
 * module is src/client/sync-bridge.ts and the worker is taken from the build: a worker thread does not get
 * the parent's TypeScript loader, and the errors it describes are rebuilt here as the caller's classes anyway.
 */
function workerPath(): URL {
  const here = import.meta.url;
  return here.endsWith('.ts') ? new URL('../../dist/client/sync-worker.js', here) : new URL('./sync-worker.js', here);
}

let call: ((r: WorkerRequest) => WorkerResponse) | null = null;

/** Whether this process has started the worker (tests: GOV_ENABLED=false and OSS mode must not). */
export function syncWorkerStarted(): boolean {
  return call !== null;
}

function workerOptions(s: ClientSettings): WorkerClientOptions {
  if (s.target.kind !== 'http') throw new Error('unreachable: only an HTTP target needs the worker');
  return {
    gatewayUrl: s.target.url,
    apiKey: s.apiKey,
    failureMode: s.failureMode,
    queueDir: s.queue?.dir ?? null,
    queueMaxEntries: s.queue?.maxEntries ?? null,
    queueMaxBytes: s.queue?.maxBytes ?? null,
    replayIntervalMs: s.queue?.replayIntervalMs ?? null,
    timeoutMs: s.timeoutMs,
    retries: s.retries,
    maxRetryAfterMs: s.maxRetryAfterMs,
  };
}

/** GovClient.send(), blocking: the same decisions, the same errors (rebuilt from the worker's description). */
export function sendSync<P extends Phase>(s: ClientSettings, phase: P, req: PhaseTypes[P]['in']): PhaseTypes[P]['out'] {
  // Disabled, kill switch, OSS mode: decided here, so that no worker is started and no socket opened.
  const local = localSend(s, phase, req);
  if (local !== null) return local;
  if (s.target.kind === 'http' && inProcessGateways().has(s.target.url.replace(/\/+$/, ''))) {
    // Unreachable from here, like a gateway that is down: the failure mode decides (open: warn and go on).
    throw new GatewayUnavailableError(`${s.target.url} is a gateway embedded in this process: a synchronous governed function would block the thread that has to answer it; declare the function async (docs/client.md, "Synchronous functions")`, null, 0);
  }
  call ??= createSyncFn<(r: WorkerRequest) => Promise<WorkerResponse>>(workerPath().href) as unknown as (r: WorkerRequest) => WorkerResponse;
  const answer = call({ options: workerOptions(s), phase, req });
  for (const w of answer.warnings) s.onWarning(w.message, w.error === null ? undefined : rebuildError(w.error));
  for (const r of answer.replays) s.onReplay?.(r.phase, r.response);
  if (!answer.ok) throw rebuildError(answer.error);
  return answer.response as PhaseTypes[P]['out'];
}
