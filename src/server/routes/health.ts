import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { HealthResponse, LivenessResponse } from '../../contracts/operations.js';
import type { AppDeps } from '../app.js';

/**
 * The unauthenticated routes: /v1/health embedded and on the sidecar, /health on the gateway, each with
 * /live and /ready beneath it. Which one a probe should use is in docs/deployment.md ("Health and probes").
 */
export const healthRoutes = (deps: AppDeps): FastifyPluginAsyncZod => async (app) => {
  const path = deps.healthPath;
  const config = { public: true };
  app.get(path, {
    config,
    schema: { tags: ['operations'], summary: 'Every configured store and link, with probe latency: 503 when any is down', response: { 200: HealthResponse, 503: HealthResponse } },
  }, async (_req, reply) => {
    const report = await deps.health.report();
    return reply.code(report.status === 'ok' ? 200 : 503).send(report);
  });
  app.get(`${path}/ready`, {
    config,
    schema: { tags: ['operations'], summary: 'Readiness: 503 only when a store governed calls need is down', response: { 200: HealthResponse, 503: HealthResponse } },
  }, async (_req, reply) => {
    const report = await deps.health.report();
    return reply.code(report.ready ? 200 : 503).send(report);
  });
  app.get(`${path}/live`, {
    config,
    schema: { tags: ['operations'], summary: 'Liveness: 200 while the process serves requests; asks no store', response: { 200: LivenessResponse } },
  }, async () => ({ status: 'ok' as const }));
};
