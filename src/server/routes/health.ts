import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { HealthResponse } from '../../contracts/operations.js';
import type { AppDeps } from '../app.js';

/** The one unauthenticated route: /v1/health embedded, /health on the gateway. */
export const healthRoutes = (deps: AppDeps): FastifyPluginAsyncZod => async (app) => {
  app.get(deps.healthPath, {
    config: { public: true },
    schema: { tags: ['operations'], summary: 'Liveness and readiness', response: { 200: HealthResponse } },
  }, async () => ({ status: 'ok' as const, ...(await deps.health()) }));
};
