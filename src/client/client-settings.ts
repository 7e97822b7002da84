import { createHash } from 'node:crypto';
import { tmpdir } from 'node:os';
import { basename, join, resolve } from 'node:path';

/**
 * The client's settings (spec, "Client settings"): options first, then the environment, then defaults.
 * Read once per client, so a GovClient behaves the same for its whole life.
 */

/** The version this client sends as `sdk_version`; test/client/settings.test.ts holds it to package.json. */
export const SDK_VERSION = '0.1.0';

export const DEFAULT_GATEWAY_URL = 'http://localhost:8000';

export type FailureMode = 'open' | 'closed' | 'queue';
export const FAILURE_MODES: readonly FailureMode[] = ['open', 'closed', 'queue'];

/** Where the client sends its calls: a gateway over HTTP, or nowhere (OSS mode: schema validation in process). */
export type ClientTarget = { kind: 'http'; url: string } | { kind: 'oss' };

export interface GovClientOptions {
  /** Gateway base address; else GOV_GATEWAY_URL; else http://localhost:8000 when a key is configured. */
  gatewayUrl?: string;
  /** Sent as X-Gov-Token and as Authorization: Bearer; else GOV_API_KEY, else GOV_KEY. */
  apiKey?: string;
  /** Else GOV_FAILURE_MODE; default open. `queue`: buffer durably and replay (docs/client.md, The queue failure mode). */
  failureMode?: FailureMode;
  /** Failure mode `queue`: the queue's directory; else GOV_QUEUE_DIR; else defaultQueueDir(). */
  queueDir?: string;
  /** Failure mode `queue`: at most this many entries; else GOV_QUEUE_MAX_ENTRIES; default 10000. */
  queueMaxEntries?: number;
  /** Failure mode `queue`: at most this many bytes of entries; else GOV_QUEUE_MAX_BYTES; default 16 MiB. */
  queueMaxBytes?: number;
  /** Failure mode `queue`: how often a timer replays a non-empty queue; 0: only on the next call. Default 30000. */
  replayIntervalMs?: number;
  /** Failure mode `queue`: sees the gateway's decision on every replayed entry (nobody else waits for it). */
  onReplay?: (phase: 'validate' | 'pre_check' | 'post_check', response: { envelope_id: string; decision: { outcome: string; reason: string } }) => void;
  /** Wrapper only: rethrow what the wrapper otherwise logs and swallows (spec: raise_on_error). */
  raiseOnError?: boolean;
  /** Per attempt, including reading the answer. Default 5000. */
  timeoutMs?: number;
  /** Further attempts after the first on a network error, a timeout, a 5xx or a 429. Default 2. */
  retries?: number;
  /** Longest Retry-After the client honours before it gives up on a 429. Default 10000. */
  maxRetryAfterMs?: number;
  /** Else GOV_ENABLED (`false`, `0`, `no`, `off` disable governance). */
  enabled?: boolean;
  /** Else GOV_KILL_SWITCH (`1`, `true`, `yes`, `on`): every call is blocked locally. */
  killSwitch?: boolean;
  /** Where warnings go (an unreachable gateway under `open`, a swallowed error). Default console.warn. */
  onWarning?: (message: string, error?: unknown) => void;
  /** The environment to read; default process.env. Tests and embedders pass their own. */
  env?: Record<string, string | undefined>;
}

export interface ClientSettings {
  target: ClientTarget;
  apiKey: string | null;
  failureMode: FailureMode;
  /** Set under failure mode `queue` only. */
  queue: { dir: string; maxEntries: number; maxBytes: number; replayIntervalMs: number } | null;
  onReplay: GovClientOptions['onReplay'] | null;
  raiseOnError: boolean;
  timeoutMs: number;
  retries: number;
  maxRetryAfterMs: number;
  enabled: boolean;
  killSwitch: boolean;
  onWarning: (message: string, error?: unknown) => void;
}

export class ClientSettingsError extends Error {
  override readonly name = 'ClientSettingsError';
}

const TRUE = new Set(['1', 'true', 'yes', 'on']);
const FALSE = new Set(['0', 'false', 'no', 'off', '']);

function flag(name: string, raw: string | undefined, fallback: boolean): boolean {
  if (raw === undefined) return fallback;
  const v = raw.trim().toLowerCase();
  if (TRUE.has(v)) return true;
  if (FALSE.has(v)) return false;
  throw new ClientSettingsError(`${name}: expected a boolean (1/0, true/false), got "${raw}"`);
}

function count(name: string, v: number, min: number, max: number): number {
  if (!Number.isInteger(v) || v < min || v > max) throw new ClientSettingsError(`${name}: expected an integer from ${min} to ${max}, got ${v}`);
  return v;
}

function gatewayUrl(raw: string): string {
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    throw new ClientSettingsError(`gateway URL: not a URL: "${raw}"`);
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new ClientSettingsError(`gateway URL: must be http:// or https://, got "${raw}"`);
  // Paths are appended to it, so a trailing slash would double.
  return raw.replace(/\/+$/, '');
}

/**
 * `<os tmpdir>/gov-client-queue/<script>-<hash of its path>`: the same program finds its predecessor's
 * queue after a restart, and two programs on one host do not share one. A tmpdir may be emptied at boot:
 * GOV_QUEUE_DIR names one that outlives it.
 */
export function defaultQueueDir(argv1: string | undefined = process.argv[1], cwd: string = process.cwd()): string {
  const script = argv1 === undefined ? cwd : resolve(cwd, argv1);
  const name = (argv1 === undefined ? 'node' : basename(argv1)).replace(/[^\w.-]/g, '_').slice(0, 64);
  return join(tmpdir(), 'gov-client-queue', `${name}-${createHash('sha256').update(script).digest('hex').slice(0, 12)}`);
}

function integer(name: string, raw: string | undefined): number | undefined {
  if (raw === undefined) return undefined;
  if (!/^\d+$/.test(raw.trim())) throw new ClientSettingsError(`${name}: expected a whole number, got "${raw}"`);
  return Number(raw.trim());
}

const defaultWarning = (message: string, error?: unknown): void => {
  const cause = error instanceof Error ? `: ${error.message}` : '';
  console.warn(`[gov] ${message}${cause}`);
};

export function resolveClientSettings(opts: GovClientOptions = {}): ClientSettings {
  const env = opts.env ?? process.env;
  const get = (k: string): string | undefined => {
    const v = env[k];
    return v === undefined || v === '' ? undefined : v;
  };
  const url = opts.gatewayUrl ?? get('GOV_GATEWAY_URL');
  const apiKey = opts.apiKey ?? get('GOV_API_KEY') ?? get('GOV_KEY') ?? null;
  const failureMode = opts.failureMode ?? get('GOV_FAILURE_MODE') ?? 'open';
  if (!FAILURE_MODES.includes(failureMode as FailureMode)) {
    throw new ClientSettingsError(`GOV_FAILURE_MODE: expected one of ${FAILURE_MODES.join(', ')}, got "${failureMode}"`);
  }
  const queue = failureMode !== 'queue' ? null : {
    dir: resolve(opts.queueDir ?? get('GOV_QUEUE_DIR') ?? defaultQueueDir()),
    maxEntries: count('queueMaxEntries', opts.queueMaxEntries ?? integer('GOV_QUEUE_MAX_ENTRIES', get('GOV_QUEUE_MAX_ENTRIES')) ?? 10_000, 1, 10_000_000),
    maxBytes: count('queueMaxBytes', opts.queueMaxBytes ?? integer('GOV_QUEUE_MAX_BYTES', get('GOV_QUEUE_MAX_BYTES')) ?? 16 * 1024 * 1024, 1024, 2 ** 40),
    replayIntervalMs: count('replayIntervalMs', opts.replayIntervalMs ?? 30_000, 0, 86_400_000),
  };
  return {
    // Spec, OSS mode: no gateway address and no key means there is no gateway to call.
    target: url === undefined && apiKey === null ? { kind: 'oss' } : { kind: 'http', url: gatewayUrl(url ?? DEFAULT_GATEWAY_URL) },
    apiKey,
    failureMode: failureMode as FailureMode,
    queue,
    onReplay: opts.onReplay ?? null,
    raiseOnError: opts.raiseOnError ?? false,
    timeoutMs: count('timeoutMs', opts.timeoutMs ?? 5000, 1, 600_000),
    retries: count('retries', opts.retries ?? 2, 0, 20),
    maxRetryAfterMs: count('maxRetryAfterMs', opts.maxRetryAfterMs ?? 10_000, 0, 600_000),
    enabled: opts.enabled ?? flag('GOV_ENABLED', get('GOV_ENABLED'), true),
    killSwitch: opts.killSwitch ?? flag('GOV_KILL_SWITCH', get('GOV_KILL_SWITCH'), false),
    onWarning: opts.onWarning ?? defaultWarning,
  };
}
