import { LimiterUnavailableError, MemorySlidingWindowLimiter, type LimitVerdict, type RateLimiter } from './rate-limiter.js';

/** The routes' kinds of limit, each with its own buckets and its own behaviour when the shared store is down. */
export type LimitScope = 'validate' | 'payments' | 'auth_ip' | 'auth_failures' | 'proxy' | 'tokens';

/**
 * What a route does when the shared limiter's store (Redis) does not answer in time (docs/rate-limits.md):
 * - `admit`: the request goes through uncounted (fail open). Validate: the spec's limit protects the
 *   gateway's capacity, and refusing every governed call while Redis is down would stop the agents it
 *   governs, which is worse than a minute of unmetered validation.
 * - `local`: this replica counts the request in its own memory against the same limit, so the limit still
 *   holds per replica (at most replicas x limit across the fleet) and nothing is refused for want of
 *   Redis. Payments, where an unbounded burst of intents is the risk, and the per-IP auth limits, whose
 *   purpose (slowing token guessing) would vanish if they failed open.
 * - The sidecar's calls (`proxy`, per agent) and LLM token budgets (`tokens`) admit, as validate does: the
 *   agent's traffic is governed either way, and Redis being down must not stop the agents.
 * Never a 500, and never a wait longer than the store's timeout.
 */
export const WHEN_STORE_DOWN: Readonly<Record<LimitScope, 'admit' | 'local'>> = {
  validate: 'admit',
  payments: 'local',
  auth_ip: 'local',
  auth_failures: 'local',
  proxy: 'admit',
  tokens: 'admit',
};

export type StoreDownReport = (scope: LimitScope, behaviour: 'admit' | 'local', error: LimiterUnavailableError) => void;

/** One limiter per scope over the shared one, each applying its WHEN_STORE_DOWN behaviour. */
export function scopedLimiters(shared: RateLimiter, report: StoreDownReport): Record<LimitScope, RateLimiter> {
  // Stays empty unless the shared store fails (the in-process limiter never rejects).
  const local = new MemorySlidingWindowLimiter();
  const scoped = (scope: LimitScope): RateLimiter => {
    const behaviour = WHEN_STORE_DOWN[scope];
    const fallback = (counted: boolean, bucket: string, limit: number, windowMs: number, nowMs: number) => (e: unknown): Promise<LimitVerdict> => {
      if (!(e instanceof LimiterUnavailableError)) throw e;
      report(scope, behaviour, e);
      if (behaviour === 'admit') return Promise.resolve({ allowed: true, retryAfterSec: 0, remaining: limit });
      return counted ? local.hit(bucket, limit, windowMs, nowMs) : local.peek(bucket, limit, windowMs, nowMs);
    };
    return {
      hit: (bucket, limit, windowMs, nowMs) => shared.hit(bucket, limit, windowMs, nowMs).catch(fallback(true, bucket, limit, windowMs, nowMs)),
      peek: (bucket, limit, windowMs, nowMs) => shared.peek(bucket, limit, windowMs, nowMs).catch(fallback(false, bucket, limit, windowMs, nowMs)),
      charge: (bucket, amount, windowMs, nowMs) =>
        shared.charge(bucket, amount, windowMs, nowMs).catch((e: unknown) => {
          if (!(e instanceof LimiterUnavailableError)) throw e;
          report(scope, behaviour, e);
          return behaviour === 'local' ? local.charge(bucket, amount, windowMs, nowMs) : undefined;
        }),
      balance: (bucket, limit, windowMs, nowMs) =>
        shared.balance(bucket, limit, windowMs, nowMs).catch((e: unknown) => {
          if (!(e instanceof LimiterUnavailableError)) throw e;
          report(scope, behaviour, e);
          return behaviour === 'local' ? local.balance(bucket, limit, windowMs, nowMs) : { allowed: true, retryAfterSec: 0, remaining: limit };
        }),
    };
  };
  const scopes = Object.keys(WHEN_STORE_DOWN) as LimitScope[];
  return Object.fromEntries(scopes.map((scope) => [scope, scoped(scope)])) as Record<LimitScope, RateLimiter>;
}
