import type { FastifyInstance, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import type { Logger } from 'pino';
import type { AgentIdentity } from '../../config/agent-identity.js';
import type { RateLimitRules } from '../../config/rate-limits.js';
import type { LimitScope, StoreDownReport } from '../../runtime/rate-limit-scopes.js';
import type { RateLimiter } from '../../runtime/rate-limiter.js';
import type { GovMetrics } from '../../telemetry/metrics.js';
import { ThrottledLog } from '../../telemetry/throttled-log.js';
import { AppError } from '../app-error.js';

export interface RateLimitOptions {
  enabled: boolean;
  /** One limiter per scope, each with its Redis-down behaviour (runtime/rate-limit-scopes.ts). */
  limiters: Record<LimitScope, RateLimiter>;
  rules: RateLimitRules;
  clock: () => number;
  /** Sidecar mode: who callers may say they are (agent-identity.ts). */
  identity?: AgentIdentity;
}

/**
 * Spec: the bucket is the X-Agent-ID header, never the body's agent_id; callers without it share `unknown`.
 * Beside a sidecar (`identity` set) the header may only name the agents the sidecar acts for, and its
 * absence means the pod's own agent: an agent cannot move to another agent's bucket by naming it.
 */
export function agentBucket(req: FastifyRequest, identity?: AgentIdentity): string {
  const h = req.headers['x-agent-id'];
  if (identity !== undefined) {
    const who = identity.resolve(h);
    if ('refused' in who) throw new AppError(who.status === 403 ? 'forbidden' : 'bad_request', who.refused);
    return who.agentId;
  }
  return typeof h === 'string' && h.length > 0 && h.length <= 200 ? h : 'unknown';
}

/**
 * The metric and the log line of a limit whose shared store did not answer: the metric counts every
 * request, the log says so at once and then at most every 10 s per scope (with the count), so a Redis
 * outage cannot flood the log.
 */
export function storeDownReporter(logger: Logger, metrics: GovMetrics): StoreDownReport {
  const logs = new Map<LimitScope, ThrottledLog>();
  return (scope, behaviour, error) => {
    metrics.rateLimitStoreDown.inc({ scope, behaviour });
    let log = logs.get(scope);
    if (log === undefined) logs.set(scope, (log = new ThrottledLog((fields, msg) => logger.warn(fields, msg))));
    log.log(
      { scope, behaviour, err: { message: error.message } },
      behaviour === 'admit' ? `rate-limit store unavailable: ${scope} requests are admitted uncounted` : `rate-limit store unavailable: ${scope} requests are counted by this replica alone`,
    );
  };
}

/**
 * Sliding-window limits. Auth routes are limited per IP before authentication (brute-force protection);
 * validate and payments are limited per agent after authentication, so an anonymous caller cannot drain an
 * agent's bucket. Each route's scope keeps its own buckets: a payment does not use up validations.
 */
export const rateLimitPlugin = fp(async (app: FastifyInstance, opts: RateLimitOptions) => {
  if (!opts.enabled) return;
  const { limiters, rules, clock } = opts;
  const refuse = (retryAfterSec: number, agent: string | null, limit: number): never => {
    const headers: Record<string, string> = { 'retry-after': String(retryAfterSec), 'x-ratelimit-limit': String(limit) };
    if (agent !== null) headers['x-ratelimit-agent'] = agent;
    throw new AppError('rate_limited', `rate limit of ${limit} requests per ${rules.windowMs / 1000} s exceeded`, { retry_after_seconds: retryAfterSec }, headers);
  };
  app.addHook('onRequest', async (req) => {
    if (req.routeOptions.config?.rateLimit !== 'auth-ip') return;
    const v = await limiters.auth_ip.hit(`ip:${req.ip}`, rules.authPerIp, rules.windowMs, clock());
    if (!v.allowed) refuse(v.retryAfterSec, null, rules.authPerIp);
  });
  app.addHook('preValidation', async (req, reply) => {
    const scope = req.routeOptions.config?.rateLimit;
    if (scope !== 'validate' && scope !== 'payments') return;
    const bucket = agentBucket(req, opts.identity);
    const limit = rules.limitFor(bucket);
    const v = await limiters[scope].hit(`${scope}:${bucket}`, limit, rules.windowMs, clock());
    if (!v.allowed) refuse(v.retryAfterSec, bucket, limit);
    reply.header('x-ratelimit-agent', bucket).header('x-ratelimit-remaining', String(v.remaining));
  });
});
