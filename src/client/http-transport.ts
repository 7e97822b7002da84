import { Agent, request } from 'undici';
import { GatewayRequestError, GatewayUnavailableError, GatewayVersionError } from '../contracts/client-errors.js';
import { SDK_VERSION } from './client-settings.js';

export interface TransportOptions {
  url: string;
  apiKey: string | null;
  timeoutMs: number;
  retries: number;
  maxRetryAfterMs: number;
  /** Injected by tests so that back-off waits are observable without real time passing. */
  sleep?: (ms: number) => Promise<void>;
  random?: () => number;
}

const BACKOFF_BASE_MS = 100;
const BACKOFF_CAP_MS = 2000;

const realSleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Retry-After is seconds or an HTTP date (RFC 9110 10.2.3); null when absent or unreadable. */
export function retryAfterMs(header: string | string[] | undefined, now = Date.now()): number | null {
  const v = Array.isArray(header) ? header[0] : header;
  if (v === undefined || v.trim() === '') return null;
  if (/^\d+$/.test(v.trim())) return Number(v.trim()) * 1000;
  const at = Date.parse(v);
  return Number.isNaN(at) ? null : Math.max(0, at - now);
}

interface ErrorBodyShape {
  error?: { code?: unknown; message?: unknown; details?: unknown };
}

/**
 * One undici Agent per timeout value, shared by every transport that uses it: its connect timeout is the
 * attempt's. The attempt's other bounds are undici's per-request header and body timeouts, not an
 * AbortSignal: undici's signal handling (an abort listener added and removed per request) cost ~7 % of a
 * governed call against an in-process gateway (docs/performance.md, "Client wrapper overhead").
 */
const agents = new Map<number, Agent>();
function agentFor(timeoutMs: number): Agent {
  let a = agents.get(timeoutMs);
  if (a === undefined) agents.set(timeoutMs, (a = new Agent({ connect: { timeout: timeoutMs } })));
  return a;
}

/** undici's own timeouts: connecting, waiting for the answer's headers, a pause in its body. */
const TIMEOUT_CODES = new Set(['UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT']);

function parseJson(text: string): unknown {
  try {
    return text.length === 0 ? undefined : JSON.parse(text);
  } catch {
    return undefined;
  }
}

/**
 * One gateway, reached over HTTP with undici (idle keep-alive sockets are unreferenced, so they never hold
 * the host process open). Retries follow the spec's Versioning rule 5: a 429 after its Retry-After (while it
 * stays under maxRetryAfterMs), a 5xx or a network error or timeout after a jittered back-off, all within
 * `retries`. A timed-out validate or pre-check may have been recorded before it timed out, so its retry can
 * leave a second row; a post-check is idempotent per pre-check (spec), so its retry cannot.
 */
export class HttpTransport {
  private readonly headers: Record<string, string>;
  private readonly sleep: (ms: number) => Promise<void>;
  private readonly random: () => number;
  private readonly agent: Agent;

  constructor(private readonly o: TransportOptions) {
    this.agent = agentFor(o.timeoutMs);
    this.headers = { 'content-type': 'application/json', 'user-agent': `gov-gateway-client/${SDK_VERSION}` };
    if (o.apiKey !== null) {
      // The full gateway reads X-Gov-Token only and the embedded one the bearer only (spec, Authentication).
      this.headers['x-gov-token'] = o.apiKey;
      this.headers.authorization = `Bearer ${o.apiKey}`;
    }
    this.sleep = o.sleep ?? realSleep;
    this.random = o.random ?? Math.random;
  }

  get url(): string {
    return this.o.url;
  }

  async call(method: 'GET' | 'POST', path: string, body?: unknown, extraHeaders?: Record<string, string>): Promise<unknown> {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const headers = extraHeaders === undefined ? this.headers : { ...this.headers, ...extraHeaders };
    const attempts = this.o.retries + 1;
    let last: { status: number | null; message: string; cause?: unknown } = { status: null, message: 'no attempt made' };
    for (let attempt = 1; ; attempt++) {
      let wait: number;
      try {
        const res = await request(this.o.url + path, { method, headers, body: payload, dispatcher: this.agent, headersTimeout: this.o.timeoutMs, bodyTimeout: this.o.timeoutMs });
        const text = await res.body.text();
        if (res.statusCode >= 200 && res.statusCode < 300) return parseJson(text);
        const err = (parseJson(text) as ErrorBodyShape | undefined)?.error;
        const message = typeof err?.message === 'string' ? err.message : `HTTP ${res.statusCode}`;
        if (res.statusCode === 426) {
          const details = err?.details as { minimum_sdk_version?: unknown } | undefined;
          const minimum = typeof details?.minimum_sdk_version === 'string' ? details.minimum_sdk_version : null;
          throw new GatewayVersionError(minimum, SDK_VERSION, minimum === null ? `the gateway refuses client library ${SDK_VERSION} (426): ${message}` : `the gateway needs client library ${minimum} or later; this is ${SDK_VERSION}`);
        }
        if (res.statusCode !== 429 && res.statusCode < 500) {
          throw new GatewayRequestError(res.statusCode, typeof err?.code === 'string' ? err.code : null, message, err?.details);
        }
        last = { status: res.statusCode, message };
        const after = retryAfterMs(res.headers['retry-after']);
        if (after !== null && after > this.o.maxRetryAfterMs) {
          throw new GatewayUnavailableError(`${method} ${path}: ${res.statusCode} with Retry-After ${after} ms, beyond the ${this.o.maxRetryAfterMs} ms the client waits`, res.statusCode, attempt);
        }
        wait = after ?? this.backoff(attempt);
      } catch (e) {
        if (e instanceof GatewayVersionError || e instanceof GatewayRequestError || e instanceof GatewayUnavailableError) throw e;
        const timedOut = TIMEOUT_CODES.has((e as { code?: string }).code ?? '');
        last = { status: null, message: timedOut ? `no answer within ${this.o.timeoutMs} ms` : (e as Error).message, cause: e };
        wait = this.backoff(attempt);
      }
      if (attempt >= attempts) {
        throw new GatewayUnavailableError(`${method} ${this.o.url}${path}: ${last.message} (after ${attempt} attempt${attempt === 1 ? '' : 's'})`, last.status, attempt, { cause: last.cause });
      }
      await this.sleep(wait);
    }
  }

  /** Full jitter (AWS Architecture Blog, "Exponential Backoff and Jitter"): clients that failed together do not retry together. */
  private backoff(attempt: number): number {
    return Math.floor(this.random() * Math.min(BACKOFF_CAP_MS, BACKOFF_BASE_MS * 2 ** (attempt - 1)));
  }
}
