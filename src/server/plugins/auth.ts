import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import type { Principal, Authenticator } from '../authenticators.js';
import { checkCapability, type Capability } from '../capabilities.js';
import { AppError } from '../app-error.js';
import type { RateLimiter } from '../../runtime/rate-limiter.js';

declare module 'fastify' {
  interface FastifyRequest {
    principal: Principal | null;
  }
  interface FastifyContextConfig {
    /** Health routes only: answered without a token. */
    public?: boolean;
    capability?: Capability;
    /**
     * /metrics: the full gateway also takes its token as `Authorization: Bearer`, the only form a Prometheus
     * scrape (a ServiceMonitor's `authorization`) can send; everywhere else it reads X-Gov-Token only.
     */
    bearerScrape?: boolean;
    /** validate, payments: per X-Agent-ID; auth-ip: per client IP, before authentication. */
    rateLimit?: 'validate' | 'payments' | 'auth-ip';
  }
}

export interface AuthOptions {
  authenticator: Authenticator;
  entitlements: ReadonlySet<string>;
  /** Failed authentications allowed per client IP per window (RATE_LIMIT_ENABLED); absent: not throttled. */
  failureThrottle?: { limiter: RateLimiter; limit: number; windowMs: number; clock: () => number };
}

/**
 * Authentication for every route but health (unknown paths included, so 404s reveal nothing to anonymous
 * callers), then the capability matrix: tier too low → 403, deployment lacks the feature → 402.
 */
/**
 * Addresses whose failure bucket was empty when last read, remembered for CLEAN_MEMO_MS: an agent's every
 * call would otherwise read the (shared, Redis) bucket first, a round trip per request for a bucket that is
 * almost always empty. Only an empty bucket is remembered, and this replica forgets it at the address's
 * first failure here, so an address can gain at most one failed guess per replica per window beyond the
 * budget (a failure on another replica is seen at this replica's next read, within CLEAN_MEMO_MS).
 */
const CLEAN_MEMO_MS = 200;
const CLEAN_MEMO_ADDRESSES = 10_000;

export const authPlugin = fp(async (app: FastifyInstance, opts: AuthOptions) => {
  const scheme = opts.authenticator.header === 'authorization' ? 'Bearer' : 'X-Gov-Token';
  const cleanUntil = new Map<string, number>();
  app.decorateRequest('principal', null);
  app.addHook('onRequest', async (req) => {
    const config = req.routeOptions.config;
    if (config?.public) return;
    const throttle = opts.failureThrottle;
    const bucket = `authfail:${req.ip}`;
    if (throttle !== undefined) {
      // Checked before the token is: an IP past its budget of failures learns nothing more, not even
      // whether its next guess would have been right, until the window lets its oldest failure go.
      const now = throttle.clock();
      if (!((cleanUntil.get(bucket) ?? 0) > now)) {
        const v = await throttle.limiter.peek(bucket, throttle.limit, throttle.windowMs, now);
        if (!v.allowed) {
          throw new AppError('rate_limited', `too many failed authentications from this address: ${throttle.limit} per ${throttle.windowMs / 1000} s`, { retry_after_seconds: v.retryAfterSec }, { 'retry-after': String(v.retryAfterSec) });
        }
        if (v.remaining >= throttle.limit) {
          if (cleanUntil.size >= CLEAN_MEMO_ADDRESSES) cleanUntil.clear();
          cleanUntil.set(bucket, now + CLEAN_MEMO_MS);
        }
      }
    }
    const principal = await opts.authenticator.authenticate(config?.bearerScrape ? scrapeHeaders(opts.authenticator, req.headers) : req.headers);
    if (principal === null) {
      cleanUntil.delete(bucket);
      if (throttle !== undefined) await throttle.limiter.hit(bucket, throttle.limit, throttle.windowMs, throttle.clock());
      const where = opts.authenticator.header === 'authorization' ? 'Authorization: Bearer <token>' : 'X-Gov-Token';
      throw new AppError('unauthorized', `missing or invalid token (send ${where})`, undefined, { 'www-authenticate': scheme });
    }
    req.principal = principal;
    const capability = config?.capability;
    if (capability === undefined) return;
    const verdict = checkCapability(principal.tier, capability, opts.entitlements);
    if (verdict === 'tier_too_low') throw new AppError('forbidden', `tier ${principal.tier} does not allow ${capability}`, { capability, tier: principal.tier });
    if (verdict === 'not_entitled') throw new AppError('entitlement_required', `${capability} is not included in this deployment`, { capability });
  });
});

/** A scrape's `Authorization: Bearer <token>` as the X-Gov-Token the full gateway reads, when it sent none. */
function scrapeHeaders(authenticator: Authenticator, headers: Record<string, string | string[] | undefined>): Record<string, string | string[] | undefined> {
  if (authenticator.header !== 'x-gov-token' || headers['x-gov-token'] !== undefined) return headers;
  const h = headers.authorization;
  if (typeof h !== 'string' || h.slice(0, 7).toLowerCase() !== 'bearer ') return headers;
  return { 'x-gov-token': h.slice(7).trim() };
}
