import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { ReviewQueueQuery, ReviewQueueResponse } from '../../contracts/operations.js';
import type { AppDeps } from '../app.js';

export const reviewRoutes = (deps: AppDeps): FastifyPluginAsyncZod => async (app) => {
  app.get('/v1/review/queue', {
    config: { capability: 'review.read' },
    schema: { tags: ['review'], summary: 'Items awaiting human review', querystring: ReviewQueueQuery, response: { 200: ReviewQueueResponse } },
  }, async (req) => ({ items: await deps.reviewQueue.list(req.query.limit) }));
};
