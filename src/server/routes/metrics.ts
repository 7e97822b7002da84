import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { AppDeps } from '../app.js';

export const metricsRoutes = (deps: AppDeps): FastifyPluginAsyncZod => async (app) => {
  app.get('/metrics', {
    config: { capability: 'metrics.read', bearerScrape: true },
    schema: { tags: ['operations'], summary: 'Prometheus metrics', hide: true },
  }, async (_req, reply) => {
    // A scrape probes the stores (bounded by GOV_HEALTH_TIMEOUT_MS), so gov_health_* is never older than it.
    await deps.health.report();
    reply.header('content-type', deps.metrics.registry.contentType);
    return deps.metrics.registry.metrics();
  });
};
