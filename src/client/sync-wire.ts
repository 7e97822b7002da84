import { BlockedError, GatewayRequestError, GatewayUnavailableError, GatewayVersionError, QueueFullError } from '../contracts/client-errors.js';
import { ClientSettingsError, type FailureMode } from './client-settings.js';

/**
 * What crosses between a synchronous governed call and its worker (sync-bridge.ts, sync-worker.ts).
 * Structured clone keeps an Error's message but not its class or its own fields, so errors travel as a
 * plain description and are rebuilt as the caller's own classes: `instanceof BlockedError` must hold on
 * the calling side exactly as on the async path.
 */

/** The settings a worker's GovClient needs: everything but functions, which cannot cross a thread. */
export interface WorkerClientOptions {
  gatewayUrl: string;
  apiKey: string | null;
  failureMode: FailureMode;
  queueDir: string | null;
  queueMaxEntries: number | null;
  queueMaxBytes: number | null;
  replayIntervalMs: number | null;
  timeoutMs: number;
  retries: number;
  maxRetryAfterMs: number;
}

export interface WorkerRequest {
  options: WorkerClientOptions;
  phase: 'validate' | 'pre_check' | 'post_check';
  req: unknown;
}

export type ErrorDescription =
  | { kind: 'BlockedError'; message: string; outcome: string; reason: string; envelope_id: string; phase: 'pre_check' | 'post_check' | 'validate' }
  | { kind: 'GatewayUnavailableError'; message: string; status: number | null; attempts: number; cause: string | null }
  | { kind: 'GatewayVersionError'; message: string; minimumVersion: string | null; sdkVersion: string }
  | { kind: 'GatewayRequestError'; message: string; status: number; code: string | null; details: unknown }
  | { kind: 'QueueFullError'; message: string; entries: number; bytes: number }
  | { kind: 'ClientSettingsError'; message: string }
  | { kind: 'Error'; name: string; message: string; stack: string | null };

/** Warnings and replay decisions the worker's client produced; the caller hands them to its own hooks. */
export interface WorkerEvents {
  warnings: Array<{ message: string; error: ErrorDescription | null }>;
  replays: Array<{ phase: 'validate' | 'pre_check' | 'post_check'; response: { envelope_id: string; decision: { outcome: string; reason: string } } }>;
}

export type WorkerResponse = WorkerEvents & ({ ok: true; response: unknown } | { ok: false; error: ErrorDescription });

/** A value that may not survive structured clone (a function in `details`) is sent as its JSON. */
function cloneable(v: unknown): unknown {
  try {
    return structuredClone(v);
  } catch {
    return JSON.parse(JSON.stringify(v ?? null));
  }
}

export function describeError(e: unknown): ErrorDescription {
  if (e instanceof BlockedError) return { kind: 'BlockedError', message: e.message, outcome: e.outcome, reason: e.reason, envelope_id: e.envelope_id, phase: e.phase };
  if (e instanceof GatewayUnavailableError) {
    const cause = e.cause instanceof Error ? e.cause.message : e.cause === undefined ? null : String(e.cause);
    return { kind: 'GatewayUnavailableError', message: e.message, status: e.status, attempts: e.attempts, cause };
  }
  if (e instanceof GatewayVersionError) return { kind: 'GatewayVersionError', message: e.message, minimumVersion: e.minimumVersion, sdkVersion: e.sdkVersion };
  if (e instanceof GatewayRequestError) return { kind: 'GatewayRequestError', message: e.message, status: e.status, code: e.code, details: cloneable(e.details) };
  if (e instanceof QueueFullError) return { kind: 'QueueFullError', message: e.message, entries: e.entries, bytes: e.bytes };
  if (e instanceof ClientSettingsError) return { kind: 'ClientSettingsError', message: e.message };
  const err = e instanceof Error ? e : new Error(String(e));
  return { kind: 'Error', name: err.name, message: err.message, stack: err.stack ?? null };
}

export function rebuildError(d: ErrorDescription): Error {
  switch (d.kind) {
    case 'BlockedError':
      return new BlockedError(d.outcome as BlockedError['outcome'], d.reason, d.envelope_id, d.phase);
    case 'GatewayUnavailableError':
      return new GatewayUnavailableError(d.message, d.status, d.attempts, d.cause === null ? undefined : { cause: new Error(d.cause) });
    case 'GatewayVersionError':
      return new GatewayVersionError(d.minimumVersion, d.sdkVersion, d.message);
    case 'GatewayRequestError':
      return new GatewayRequestError(d.status, d.code, d.message, d.details);
    case 'QueueFullError':
      return new QueueFullError(d.message, d.entries, d.bytes);
    case 'ClientSettingsError':
      return new ClientSettingsError(d.message);
    default: {
      const e = new Error(d.message);
      e.name = d.name;
      if (d.stack !== null) e.stack = d.stack;
      return e;
    }
  }
}
