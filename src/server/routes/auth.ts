import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { AuthCheckResponse } from '../../contracts/operations.js';
import type { AppDeps } from '../app.js';

export const authRoutes = (_deps: AppDeps): FastifyPluginAsyncZod => async (app) => {
  app.get('/v1/auth/check', {
    config: { capability: 'auth.check', rateLimit: 'auth-ip' },
    schema: { tags: ['auth'], summary: 'Validate the presented token', response: { 200: AuthCheckResponse } },
  }, async (req) => ({ valid: true as const, tier: req.principal!.tier, subject: req.principal!.subject }));
};
