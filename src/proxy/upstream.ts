import type { EventEmitter } from 'node:events';
import type { IncomingHttpHeaders } from 'node:http';
import { parseHeaders, Pool, type Dispatcher } from '../net/undici-dispatchers.js';

export interface UpstreamTarget {
  /** scheme://host:port */
  origin: string;
  /** Path of the upstream base URL as written ('' for a bare origin); routes.ts joins the call's path to it. */
  basePath: string;
}

export function parseTarget(base: string): UpstreamTarget {
  const u = new URL(base);
  return { origin: u.origin, basePath: u.pathname === '/' ? '' : u.pathname };
}

export interface UpstreamResponse {
  status: number;
  headers: IncomingHttpHeaders;
  body: Dispatcher.ResponseData['body'];
}

/** An answer read whole by UpstreamPools.requestWhole: its head and all of its body. */
export interface UpstreamWholeResponse {
  status: number;
  headers: IncomingHttpHeaders;
  raw: Buffer;
}

/**
 * `unreadable`: the upstream answered in a form the sidecar cannot inspect (compressed, or not JSON where JSON
 * is due). `redirect`: it answered with a redirect, which the sidecar neither follows nor releases.
 */
export type UpstreamFailureKind = 'timeout' | 'unreachable' | 'unreadable' | 'redirect' | 'too_large' | 'aborted';

/** A transport failure talking to the upstream, classified for the caller's error format. */
export class UpstreamFailure extends Error {
  constructor(
    readonly kind: UpstreamFailureKind,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/**
 * A call's abort switch: aborted when the caller goes away or the shutdown grace runs out, its reason says
 * which. It stands in for an AbortController on the forward path because undici takes any signal with
 * EventEmitter-style `on`/`once`/`removeListener` and `aborted`/`reason`: an AbortController plus the
 * EventTarget listener undici adds and removes per request costs ~6 µs of main-thread CPU per call
 * (a quarter of the undici round trip itself); this costs well under 1 µs. Listeners run synchronously
 * inside abort(), as an AbortSignal's do.
 */
export class CallAbort {
  aborted = false;
  reason: unknown = undefined;
  private listeners: (() => void)[] = [];

  abort(reason: unknown): void {
    if (this.aborted) return;
    this.aborted = true;
    this.reason = reason;
    const ls = this.listeners;
    this.listeners = [];
    for (const l of ls) l();
  }

  on(_event: 'abort', listener: () => void): this {
    if (!this.aborted) this.listeners.push(listener);
    return this;
  }

  /** Every listener runs at most once: they are all dropped when the call is aborted. */
  once(event: 'abort', listener: () => void): this {
    return this.on(event, listener);
  }

  removeListener(_event: 'abort', listener: () => void): this {
    const i = this.listeners.indexOf(listener);
    if (i >= 0) this.listeners.splice(i, 1);
    return this;
  }

  off(event: 'abort', listener: () => void): this {
    return this.removeListener(event, listener);
  }
}

/** What classifying a failure needs of the call's abort switch (a CallAbort or an AbortSignal). */
export interface AbortState {
  readonly aborted: boolean;
}

/**
 * A redirect sends its reader to another address: released to the caller, an SDK that follows it reads that
 * server's answer, which never passed the sidecar (the agent is taken around its governance). So no route
 * releases one. 304 is not a redirect: it names no other address and carries no body.
 */
export function isRedirect(status: number): boolean {
  return status >= 300 && status < 400 && status !== 304;
}

/** The failure a redirect answer is recorded and refused as (the Location is not recorded: it may carry a token). */
export function redirectFailure(status: number): UpstreamFailure {
  return new UpstreamFailure('redirect', `the upstream answered ${status} (a redirect); the sidecar neither follows nor releases redirects`);
}

const TIMEOUT_CODES = new Set(['UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT', 'UND_ERR_CONNECT_TIMEOUT']);

export function classifyUpstreamError(e: unknown, timeoutMs: number, signal?: AbortState): UpstreamFailure {
  if (e instanceof UpstreamFailure) return e;
  // undici rejects with the abort reason itself, which may be any value (ours are strings).
  if (signal?.aborted) return new UpstreamFailure('aborted', 'upstream request aborted', { cause: e });
  const code = (e as { code?: string } | null)?.code ?? '';
  const name = (e as { name?: string } | null)?.name ?? '';
  if (TIMEOUT_CODES.has(code)) return new UpstreamFailure('timeout', `upstream did not answer within ${timeoutMs} ms`, { cause: e });
  if (code === 'UND_ERR_ABORTED' || name === 'AbortError') return new UpstreamFailure('aborted', 'upstream request aborted', { cause: e });
  // The message of a socket error names only the upstream address, never request content.
  return new UpstreamFailure('unreachable', `upstream unreachable (${code || name || 'connection error'})`, { cause: e });
}

/**
 * One keep-alive pool per upstream origin, created on first use and shared by every call: connection
 * set-up (and TLS) is paid once per connection, not per call.
 */
export class UpstreamPools {
  private readonly pools = new Map<string, Pool>();
  constructor(private readonly timeoutMs: number) {}

  private pool(origin: string): Pool {
    let p = this.pools.get(origin);
    if (p === undefined) {
      p = new Pool(origin, {
        headersTimeout: this.timeoutMs,
        bodyTimeout: this.timeoutMs,
        connectTimeout: Math.min(this.timeoutMs, 10_000),
        keepAliveTimeout: 30_000,
      });
      this.pools.set(origin, p);
    }
    return p;
  }

  /** `path` is the full upstream path and query (RouteMatch.upstreamPath). */
  request(
    target: UpstreamTarget,
    method: string,
    path: string,
    headers: Record<string, string | string[]>,
    body: Buffer | null,
    signal: CallAbort | AbortSignal,
    timeoutMs = this.timeoutMs,
  ): Promise<UpstreamResponse> {
    const opts: Dispatcher.RequestOptions = this.options(method, path, headers, body, timeoutMs);
    // A CallAbort is EventEmitter-shaped, which is all undici uses of an EventEmitter signal.
    opts.signal = signal as AbortSignal | EventEmitter;
    return this.pool(target.origin)
      .request(opts)
      .then(
        (r) => ({ status: r.statusCode, headers: r.headers as IncomingHttpHeaders, body: r.body }),
        (e: unknown) => {
          throw classifyUpstreamError(e, timeoutMs, signal);
        },
      );
  }

  /**
   * request() for an answer the caller reads whole: the body is collected as undici hands it over and the
   * promise settles once it has all arrived, with no stream between. `request()` wraps every body in a
   * Readable, and reading a small answer back through it cost ~11 µs of a call at 500 req/s
   * (docs/performance.md, "Session 25"). Past `limit` bytes the request is aborted and the promise fails
   * with tooLarge(limit): a bound, not a memory spike. Fails as request() does otherwise (classified).
   */
  requestWhole(
    target: UpstreamTarget,
    method: string,
    path: string,
    headers: Record<string, string | string[]>,
    body: Buffer | null,
    signal: CallAbort,
    limit: number,
    timeoutMs = this.timeoutMs,
  ): Promise<UpstreamWholeResponse> {
    const opts = this.options(method, path, headers, body, timeoutMs);
    return new Promise((resolve, reject) => {
      this.pool(target.origin).dispatch(opts, new WholeAnswerHandler(resolve, reject, signal, limit, timeoutMs));
    });
  }

  /** The pool enforces its own timeouts; a route with a timeout of its own passes it with the request. */
  private options(method: string, path: string, headers: Record<string, string | string[]>, body: Buffer | null, timeoutMs: number): Dispatcher.DispatchOptions {
    const opts: Dispatcher.DispatchOptions = { method: method as Dispatcher.HttpMethod, path, headers, body: body !== null && body.length > 0 ? body : null };
    if (timeoutMs !== this.timeoutMs) {
      opts.headersTimeout = timeoutMs;
      opts.bodyTimeout = timeoutMs;
    }
    return opts;
  }

  async close(): Promise<void> {
    await Promise.all([...this.pools.values()].map((p) => p.destroy().catch(() => undefined)));
    this.pools.clear();
  }
}

/**
 * undici's handler for requestWhole. Only its settled promise leaves it: the caller's abort aborts the request
 * (before it is sent, or while the answer arrives), and whatever ends it first settles it, once.
 */
class WholeAnswerHandler implements Dispatcher.DispatchHandler {
  private status = 0;
  private headers: IncomingHttpHeaders = {};
  private readonly chunks: Buffer[] = [];
  private size = 0;
  private abortRequest: ((err?: Error) => void) | null = null;
  private settled = false;

  constructor(
    private readonly resolve: (r: UpstreamWholeResponse) => void,
    private readonly reject: (e: UpstreamFailure) => void,
    private readonly signal: CallAbort,
    private readonly limit: number,
    private readonly timeoutMs: number,
  ) {
    signal.on('abort', this.onAbort);
  }

  // undici aborts with whatever it is given, and reports it to onError; the reason (a string) classifies as `aborted`.
  private readonly onAbort = (): void => this.abortRequest?.(this.signal.reason as Error);

  onConnect(abort: (err?: Error) => void): void {
    if (this.signal.aborted) abort(this.signal.reason as Error);
    else this.abortRequest = abort;
  }

  onHeaders(statusCode: number, rawHeaders: Buffer[]): boolean {
    // 1xx answers are interim: the final one follows on the same request.
    if (statusCode < 200) return true;
    this.status = statusCode;
    this.headers = parseHeaders(rawHeaders) as IncomingHttpHeaders;
    return true;
  }

  onData(chunk: Buffer): boolean {
    if (this.settled) return false;
    this.size += chunk.length;
    if (this.size > this.limit) {
      this.fail(tooLarge(this.limit));
      this.abortRequest?.(new Error('answer too large'));
      return false;
    }
    this.chunks.push(chunk);
    return true;
  }

  onComplete(): void {
    if (!this.settle()) return;
    const c = this.chunks;
    this.resolve({ status: this.status, headers: this.headers, raw: c.length === 1 ? c[0] : Buffer.concat(c, this.size) });
  }

  onError(err: Error): void {
    this.fail(classifyUpstreamError(err, this.timeoutMs, this.signal));
  }

  private fail(e: UpstreamFailure): void {
    if (this.settle()) this.reject(e);
  }

  /** True the first time only: the caller settles the promise; the abort listener goes either way. */
  private settle(): boolean {
    if (this.settled) return false;
    this.settled = true;
    this.signal.removeListener('abort', this.onAbort);
    return true;
  }
}

/** An answer past GOV_PROXY_MAX_ANSWER_BYTES: not read further, never released. */
export function tooLarge(limit: number): UpstreamFailure {
  return new UpstreamFailure('too_large', `the upstream's answer is larger than GOV_PROXY_MAX_ANSWER_BYTES (${limit} bytes); it was not read further nor released`);
}

/**
 * Drops an upstream body unread. undici's body emits an abort error when destroyed before its end, and
 * an error nobody listens to would take the process down.
 */
export function discardBody(body: UpstreamResponse['body']): void {
  body.on('error', () => undefined);
  body.destroy();
}

/**
 * Reads a whole upstream body, bounded: an answer larger than the bound is a failure, not a memory spike.
 * Event listeners rather than `for await`: the async iterator costs a promise per chunk and a few µs per
 * call. The pool's bodyTimeout and an abort both surface as the body's 'error'.
 */
export function readAll(body: UpstreamResponse['body'], limit: number, timeoutMs: number, signal?: AbortState): Promise<Buffer> {
  return new Promise<Buffer>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let settled = false;
    const fail = (e: unknown) => {
      if (settled) return;
      settled = true;
      reject(classifyUpstreamError(e, timeoutMs, signal));
    };
    body.on('data', (b: Buffer) => {
      if (settled) return;
      size += b.length;
      if (size > limit) {
        fail(tooLarge(limit));
        body.destroy();
        return;
      }
      chunks.push(b);
    });
    body.once('end', () => {
      if (settled) return;
      settled = true;
      resolve(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, size));
    });
    body.once('error', fail);
    // Destroyed without an error (and without its end): what `for await` reports as a premature close.
    // 'close' follows every 'end' too: build the error (a stack capture, ~10 µs) only when it is one.
    body.once('close', () => {
      if (!settled) fail(Object.assign(new Error('premature close'), { code: 'ERR_STREAM_PREMATURE_CLOSE' }));
    });
  });
}
