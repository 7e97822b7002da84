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
  /**
   * Budgets of amounts rather than requests (an agent's LLM tokens per window): `charge` adds what a call
   * spent, never refusing, since it is known only once the answer came back; `balance` refuses once the
   * window's total has reached `limit`, with the seconds until enough of it leaves the window.
   */
  charge(bucket: string, amount: number, windowMs: number, nowMs: number): Promise<void>;
  balance(bucket: string, limit: number, windowMs: number, nowMs: number): Promise<LimitVerdict>;
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
  private readonly amounts = new Map<string, AmountLog>();
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

  async charge(bucket: string, amount: number, windowMs: number, nowMs: number): Promise<void> {
    if (!(amount > 0)) return;
    this.sweep(windowMs, nowMs);
    let b = this.amounts.get(bucket);
    if (b === undefined) this.amounts.set(bucket, (b = { at: [], amount: [], total: 0 }));
    this.expire(b, nowMs - windowMs);
    b.at.push(nowMs);
    b.amount.push(amount);
    b.total += amount;
  }

  async balance(bucket: string, limit: number, windowMs: number, nowMs: number): Promise<LimitVerdict> {
    const b = this.amounts.get(bucket);
    if (b === undefined) return { allowed: limit > 0, retryAfterSec: limit > 0 ? 0 : Math.ceil(windowMs / 1000), remaining: limit };
    this.expire(b, nowMs - windowMs);
    if (b.total < limit) return { allowed: true, retryAfterSec: 0, remaining: limit - b.total };
    if (limit <= 0) return { allowed: false, retryAfterSec: Math.ceil(windowMs / 1000), remaining: 0 };
    // Below the limit again once the oldest charges that take the total to it have left the window.
    let total = b.total;
    let i = 0;
    while (total >= limit) total -= b.amount[i++];
    return { allowed: false, retryAfterSec: Math.max(1, Math.ceil((b.at[i - 1] + windowMs - nowMs) / 1000)), remaining: 0 };
  }

  private expire(b: AmountLog, cutoff: number): void {
    let drop = 0;
    while (drop < b.at.length && b.at[drop] <= cutoff) b.total -= b.amount[drop++];
    if (drop > 0) {
      b.at.splice(0, drop);
      b.amount.splice(0, drop);
    }
  }

  private sweep(windowMs: number, nowMs: number): void {
    if (nowMs - this.lastSweep < windowMs) return;
    this.lastSweep = nowMs;
    const cutoff = nowMs - windowMs;
    for (const [k, log] of this.buckets) if (log.length === 0 || log[log.length - 1] <= cutoff) this.buckets.delete(k);
    for (const [k, b] of this.amounts) if (b.at.length === 0 || b.at[b.at.length - 1] <= cutoff) this.amounts.delete(k);
  }
}

/** A budget bucket's charges inside the window, oldest first, and their sum. */
interface AmountLog {
  at: number[];
  amount: number[];
  total: number;
}
