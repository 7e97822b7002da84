import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { LimiterUnavailableError, type LimitVerdict, type RateLimiter } from '../runtime/rate-limiter.js';

/**
 * One sorted set per bucket holds the admitted requests of the window (score: their time in ms), so the
 * count is exact across every replica sharing the Redis: the (limit+1)th request in any window is
 * refused, as with the in-process log. Trimming, counting and adding run as one script, which Redis runs
 * atomically: two replicas cannot both take the last place.
 *
 * KEYS[1] the bucket; ARGV now (ms), window (ms), limit, 1 to count the request (hit) or 0 (peek), a
 * member name unique to this request. Returns {admitted 1/0, ms until a place frees (refused only),
 * places left}.
 */
const SLIDING_WINDOW_LUA = `
local now = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local limit = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
local n = redis.call('ZCARD', KEYS[1])
if n >= limit then
  if limit <= 0 then return {0, window, 0} end
  -- A place frees when the entry n-limit (0-based) leaves the window; it is the oldest one unless the
  -- limit was lowered while the bucket was full.
  local e = redis.call('ZRANGE', KEYS[1], n - limit, n - limit, 'WITHSCORES')
  return {0, tonumber(e[2]) + window - now, 0}
end
if ARGV[4] == '1' then
  redis.call('ZADD', KEYS[1], now, ARGV[5])
  redis.call('PEXPIRE', KEYS[1], window)
  n = n + 1
end
return {1, 0, limit - n}
`;

/**
 * Budgets of amounts (tokens): one sorted set per bucket whose members carry their amount after the last
 * `:` (score: their time in ms). Charging adds one member; the balance trims the window and sums what is
 * left, in one script, so every replica sees the same total. A window holds one member per governed call, so
 * the sum reads at most a minute's calls of one agent.
 *
 * CHARGE: KEYS[1] the bucket; ARGV now (ms), window (ms), member (`<unique>:<amount>`).
 * BALANCE: KEYS[1] the bucket; ARGV now (ms), window (ms), limit. Returns {allowed 1/0, ms until the total
 * drops below the limit (refused only), what is left of the limit}.
 */
const BUDGET_CHARGE_LUA = `
redis.call('ZADD', KEYS[1], tonumber(ARGV[1]), ARGV[3])
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]))
return 1
`;

const BUDGET_BALANCE_LUA = `
local now = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local limit = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
local entries = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
local total = 0
for i = 1, #entries, 2 do
  total = total + tonumber(string.match(entries[i], ':(%d+)$'))
end
if total < limit then return {1, 0, limit - total} end
if limit <= 0 then return {0, window, 0} end
for i = 1, #entries, 2 do
  total = total - tonumber(string.match(entries[i], ':(%d+)$'))
  if total < limit then return {0, tonumber(entries[i + 1]) + window - now, 0} end
end
return {0, window, 0}
`;

interface SlidingWindowCommand {
  govSlidingWindow(key: string, now: number, windowMs: number, limit: number, count: 0 | 1, member: string): Promise<[number, number, number]>;
  govBudgetCharge(key: string, now: number, windowMs: number, member: string): Promise<number>;
  govBudgetBalance(key: string, now: number, windowMs: number, limit: number): Promise<[number, number, number]>;
}

/** After a command timed out, the limiter answers "unavailable" without asking Redis for this long. */
const PAUSE_AFTER_TIMEOUT_MS = 1000;

/**
 * The RateLimiter port on Redis, shared by every replica that uses the same Redis and key prefix.
 *
 * Time is the caller's clock (the gateway's, as for its audit rows), so replicas' clocks should agree
 * (NTP): a replica whose clock is d ms ahead sees a window that ends d ms later for everyone's requests.
 * A failure of any kind (not connected, connection lost mid-command, no answer within the connection's
 * timeout) rejects with LimiterUnavailableError. After a timeout the limiter stops asking for
 * PAUSE_AFTER_TIMEOUT_MS, so a Redis that hangs costs one request the timeout, not every request.
 */
export class RedisSlidingWindowLimiter implements RateLimiter {
  private readonly client: Redis & SlidingWindowCommand;
  /** Unique member names without a random draw per request: this process's tag and a counter. */
  private readonly tag = randomBytes(6).toString('base64url');
  private seq = 0;
  private pausedUntil = 0;

  constructor(client: Redis, private readonly keyPrefix: string) {
    client.defineCommand('govSlidingWindow', { numberOfKeys: 1, lua: SLIDING_WINDOW_LUA });
    client.defineCommand('govBudgetCharge', { numberOfKeys: 1, lua: BUDGET_CHARGE_LUA });
    client.defineCommand('govBudgetBalance', { numberOfKeys: 1, lua: BUDGET_BALANCE_LUA });
    this.client = client as Redis & SlidingWindowCommand;
  }

  hit(bucket: string, limit: number, windowMs: number, nowMs: number): Promise<LimitVerdict> {
    return this.run(bucket, limit, windowMs, nowMs, 1);
  }

  peek(bucket: string, limit: number, windowMs: number, nowMs: number): Promise<LimitVerdict> {
    return this.run(bucket, limit, windowMs, nowMs, 0);
  }

  async charge(bucket: string, amount: number, windowMs: number, nowMs: number): Promise<void> {
    if (!(amount > 0)) return;
    await this.ask(() => this.client.govBudgetCharge(this.keyOf(bucket), Math.floor(nowMs), windowMs, `${this.member()}:${Math.round(amount)}`));
  }

  async balance(bucket: string, limit: number, windowMs: number, nowMs: number): Promise<LimitVerdict> {
    const [allowed, retryMs, remaining] = await this.ask(() => this.client.govBudgetBalance(this.keyOf(bucket), Math.floor(nowMs), windowMs, limit));
    if (allowed === 1) return { allowed: true, retryAfterSec: 0, remaining };
    return { allowed: false, retryAfterSec: limit <= 0 ? Math.ceil(windowMs / 1000) : Math.max(1, Math.ceil(retryMs / 1000)), remaining: 0 };
  }

  /** The key of a bucket (tests and operators read it with redis-cli). */
  keyOf(bucket: string): string {
    return `${this.keyPrefix}rl:${bucket}`;
  }

  private member(): string {
    return `${this.tag}:${(this.seq = (this.seq + 1) % Number.MAX_SAFE_INTEGER)}`;
  }

  /** One command, with a failure of any kind as LimiterUnavailableError and the pause after a timeout. */
  private async ask<T>(command: () => Promise<T>): Promise<T> {
    if (this.pausedUntil !== 0) {
      if (performance.now() < this.pausedUntil) throw new LimiterUnavailableError('redis timed out recently; not asked again yet');
      this.pausedUntil = 0;
    }
    try {
      return await command();
    } catch (e) {
      const message = (e as Error).message;
      if (/timed out/i.test(message)) this.pausedUntil = performance.now() + PAUSE_AFTER_TIMEOUT_MS;
      throw new LimiterUnavailableError(`redis: ${message}`);
    }
  }

  private async run(bucket: string, limit: number, windowMs: number, nowMs: number, count: 0 | 1): Promise<LimitVerdict> {
    const [admitted, retryMs, remaining] = await this.ask(() => this.client.govSlidingWindow(this.keyOf(bucket), Math.floor(nowMs), windowMs, limit, count, this.member()));
    if (admitted === 1) return { allowed: true, retryAfterSec: 0, remaining };
    return { allowed: false, retryAfterSec: limit <= 0 ? Math.ceil(windowMs / 1000) : Math.max(1, Math.ceil(retryMs / 1000)), remaining: 0 };
  }
}
