import type { FastifyInstance, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import type { AgentIdentity } from '../../config/agent-identity.js';
import type { RateLimitRules } from '../../config/rate-limits.js';
import type { RateLimiter } from '../../runtime/rate-limiter.js';
import { AppError } from '../app-error.js';

export interface RateLimitOptions {
  enabled: boolean;
  limiter: RateLimiter;
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
 * Sliding-window limits. Auth routes are limited per IP before authentication (brute-force protection);
 * validate is limited per agent after authentication, so an anonymous caller cannot drain an agent's bucket.
 */
export const rateLimitPlugin = fp(async (app: FastifyInstance, opts: RateLimitOptions) => {
  if (!opts.enabled) return;
  const { limiter, rules, clock } = opts;
  const refuse = (retryAfterSec: number, agent: string | null, limit: number): never => {
    const headers: Record<string, string> = { 'retry-after': String(retryAfterSec), 'x-ratelimit-limit': String(limit) };
    if (agent !== null) headers['x-ratelimit-agent'] = agent;
    throw new AppError('rate_limited', `rate limit of ${limit} requests per ${rules.windowMs / 1000} s exceeded`, { retry_after_seconds: retryAfterSec }, headers);
  };
  app.addHook('onRequest', async (req) => {
    if (req.routeOptions.config?.rateLimit !== 'auth-ip') return;
    const v = await limiter.hit(`ip:${req.ip}`, rules.authPerIp, rules.windowMs, clock());
    if (!v.allowed) refuse(v.retryAfterSec, null, rules.authPerIp);
  });
  app.addHook('preValidation', async (req, reply) => {
    if (req.routeOptions.config?.rateLimit !== 'agent') return;
    const bucket = agentBucket(req, opts.identity);
    const limit = rules.limitFor(bucket);
    const v = await limiter.hit(`agent:${bucket}`, limit, rules.windowMs, clock());
    if (!v.allowed) refuse(v.retryAfterSec, bucket, limit);
    reply.header('x-ratelimit-agent', bucket).header('x-ratelimit-remaining', String(v.remaining));
  });
});
