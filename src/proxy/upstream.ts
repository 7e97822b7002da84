import type { IncomingHttpHeaders } from 'node:http';
import { Pool, type Dispatcher } from 'undici';

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

export type UpstreamFailureKind = 'timeout' | 'unreachable' | 'aborted';

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

const TIMEOUT_CODES = new Set(['UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT', 'UND_ERR_CONNECT_TIMEOUT']);

export function classifyUpstreamError(e: unknown, timeoutMs: number, signal?: AbortSignal): UpstreamFailure {
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
  async request(
    target: UpstreamTarget,
    method: string,
    path: string,
    headers: Record<string, string | string[]>,
    body: Buffer | null,
    signal: AbortSignal,
    timeoutMs = this.timeoutMs,
  ): Promise<UpstreamResponse> {
    try {
      const r = await this.pool(target.origin).request({
        method: method as Dispatcher.HttpMethod,
        path,
        headers,
        body: body !== null && body.length > 0 ? body : null,
        signal,
        headersTimeout: timeoutMs,
        bodyTimeout: timeoutMs,
      });
      return { status: r.statusCode, headers: r.headers as IncomingHttpHeaders, body: r.body };
    } catch (e) {
      throw classifyUpstreamError(e, timeoutMs, signal);
    }
  }

  async close(): Promise<void> {
    await Promise.all([...this.pools.values()].map((p) => p.destroy().catch(() => undefined)));
    this.pools.clear();
  }
}

/** Reads a whole upstream body, bounded: an answer larger than the bound is a failure, not a memory spike. */
export async function readAll(body: UpstreamResponse['body'], limit: number, timeoutMs: number, signal?: AbortSignal): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const c of body) {
      const b = c as Buffer;
      size += b.length;
      if (size > limit) {
        body.destroy();
        throw new UpstreamFailure('unreachable', `upstream answer is larger than ${limit} bytes`);
      }
      chunks.push(b);
    }
  } catch (e) {
    throw classifyUpstreamError(e, timeoutMs, signal);
  }
  return chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, size);
}
