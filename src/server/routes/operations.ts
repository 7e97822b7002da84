import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { Outcome, Tier } from '../../contracts/common.js';
import type { AppDeps } from '../app.js';

const ReviewQueueResponse = z.object({
  items: z.array(z.object({
    envelope_id: z.string(),
    agent_id: z.string(),
    outcome: Outcome,
    reason: z.string(),
    status: z.string(),
    created_at: z.string(),
    review_deadline: z.string(),
  })),
});

/** Health, auth check, review queue and metrics: the small operational routes. */
export const operationsRoutes = (deps: AppDeps): FastifyPluginAsyncZod => async (app) => {
  app.get(deps.healthPath, {
    config: { public: true },
    schema: { tags: ['operations'], summary: 'Liveness and readiness', response: { 200: z.object({ status: z.literal('ok') }).loose() } },
  }, async () => ({ status: 'ok' as const, ...(await deps.health()) }));

  app.get('/v1/auth/check', {
    config: { capability: 'auth.check', rateLimit: 'auth-ip' },
    schema: { tags: ['auth'], summary: 'Validate the presented token', response: { 200: z.object({ valid: z.literal(true), tier: Tier, subject: z.string() }) } },
  }, async (req) => ({ valid: true as const, tier: req.principal!.tier, subject: req.principal!.subject }));

  app.get('/v1/review/queue', {
    config: { capability: 'review.read' },
    schema: { tags: ['review'], summary: 'Items awaiting human review', querystring: z.object({ limit: z.coerce.number().int().min(1).max(1000).default(100) }), response: { 200: ReviewQueueResponse } },
  }, async (req) => ({ items: deps.reviewQueue.list(req.query.limit) }));

  app.get('/metrics', {
    config: { capability: 'metrics.read' },
    schema: { tags: ['operations'], summary: 'Prometheus metrics', hide: true },
  }, async (_req, reply) => {
    reply.header('content-type', deps.metrics.registry.contentType);
    return deps.metrics.registry.metrics();
  });
};
