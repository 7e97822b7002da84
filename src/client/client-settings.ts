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
  /** Else GOV_FAILURE_MODE; default open. `queue` is named by the spec but refused until it exists (docs/client.md). */
  failureMode?: FailureMode;
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
  // Refused rather than run as `open`: a caller who asked for a durable buffer must not silently lose calls.
  if (failureMode === 'queue') throw new ClientSettingsError('GOV_FAILURE_MODE: queue (a durable buffer replayed when the gateway returns) is not available in this client yet; use open or closed');
  return {
    // Spec, OSS mode: no gateway address and no key means there is no gateway to call.
    target: url === undefined && apiKey === null ? { kind: 'oss' } : { kind: 'http', url: gatewayUrl(url ?? DEFAULT_GATEWAY_URL) },
    apiKey,
    failureMode: failureMode as FailureMode,
    raiseOnError: opts.raiseOnError ?? false,
    timeoutMs: count('timeoutMs', opts.timeoutMs ?? 5000, 1, 600_000),
    retries: count('retries', opts.retries ?? 2, 0, 20),
    maxRetryAfterMs: count('maxRetryAfterMs', opts.maxRetryAfterMs ?? 10_000, 0, 600_000),
    enabled: opts.enabled ?? flag('GOV_ENABLED', get('GOV_ENABLED'), true),
    killSwitch: opts.killSwitch ?? flag('GOV_KILL_SWITCH', get('GOV_KILL_SWITCH'), false),
    onWarning: opts.onWarning ?? defaultWarning,
  };
}
