import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { AppDeps } from '../app.js';

export const metricsRoutes = (deps: AppDeps): FastifyPluginAsyncZod => async (app) => {
  app.get('/metrics', {
    config: { capability: 'metrics.read' },
    schema: { tags: ['operations'], summary: 'Prometheus metrics', hide: true },
  }, async (_req, reply) => {
    reply.header('content-type', deps.metrics.registry.contentType);
    return deps.metrics.registry.metrics();
  });
};
