export interface LimitVerdict {
  allowed: boolean;
  /** Seconds until the oldest counted request leaves the window (only when refused). */
  retryAfterSec: number;
  remaining: number;
}

/**
 * The limiter port: in process (below) or a Redis sliding window shared across replicas
 * (store/redis-limiter.ts), hence promises. A shared limiter that cannot get an answer from its store in
 * time rejects with LimiterUnavailableError; what a route does then is its own (rate-limit-scopes.ts).
 */
export interface RateLimiter {
  hit(bucket: string, limit: number, windowMs: number, nowMs: number): Promise<LimitVerdict>;
  /** The verdict hit() would give, without counting a request (a bucket counted only on failures). */
  peek(bucket: string, limit: number, windowMs: number, nowMs: number): Promise<LimitVerdict>;
}

/** The shared store did not answer (down, unreachable or slower than its timeout). */
export class LimiterUnavailableError extends Error {
  override name = 'LimiterUnavailableError';
}

/**
 * Exact sliding-window log: each bucket keeps the timestamps of its admitted requests inside the window,
 * so the (limit+1)th request in any window of windowMs is refused, with no fixed-window edge bursts.
 * Memory is bounded by limit timestamps per live bucket; idle buckets are swept.
 */
export class MemorySlidingWindowLimiter implements RateLimiter {
  private readonly buckets = new Map<string, number[]>();
  private lastSweep = 0;

  async hit(bucket: string, limit: number, windowMs: number, nowMs: number): Promise<LimitVerdict> {
    return this.verdict(bucket, limit, windowMs, nowMs, true);
  }

  async peek(bucket: string, limit: number, windowMs: number, nowMs: number): Promise<LimitVerdict> {
    return this.verdict(bucket, limit, windowMs, nowMs, false);
  }

  private verdict(bucket: string, limit: number, windowMs: number, nowMs: number, count: boolean): LimitVerdict {
    this.sweep(windowMs, nowMs);
    let log = this.buckets.get(bucket);
    if (log === undefined) {
      if (!count) return { allowed: limit > 0, retryAfterSec: limit > 0 ? 0 : Math.ceil(windowMs / 1000), remaining: limit };
      log = [];
      this.buckets.set(bucket, log);
    }
    const cutoff = nowMs - windowMs;
    let drop = 0;
    while (drop < log.length && log[drop] <= cutoff) drop++;
    if (drop > 0) log.splice(0, drop);
    if (log.length >= limit) {
      const retryAfterSec = limit === 0 ? Math.ceil(windowMs / 1000) : Math.max(1, Math.ceil((log[0] + windowMs - nowMs) / 1000));
      return { allowed: false, retryAfterSec, remaining: 0 };
    }
    if (count) log.push(nowMs);
    return { allowed: true, retryAfterSec: 0, remaining: limit - log.length };
  }

  private sweep(windowMs: number, nowMs: number): void {
    if (nowMs - this.lastSweep < windowMs) return;
    this.lastSweep = nowMs;
    const cutoff = nowMs - windowMs;
    for (const [k, log] of this.buckets) if (log.length === 0 || log[log.length - 1] <= cutoff) this.buckets.delete(k);
  }
}
