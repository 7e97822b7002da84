import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { PaymentIntentRequest, PaymentIntentResponse } from '../../contracts/payments.js';
import type { AppDeps } from '../app.js';
import { responseForTier } from '../score-view.js';
import { assertSdkVersion } from './runtime.js';

/** The spec's payments route: a payment intent governed before it is made (docs/payments.md). */
export const paymentRoutes = (deps: AppDeps): FastifyPluginAsyncZod => async (app) => {
  app.post('/v1/invoicepay/payments', {
    config: { capability: 'runtime.govern', rateLimit: 'payments' },
    schema: { tags: ['payments'], summary: 'Govern a payment intent (idempotent per agent and idempotency_key)', body: PaymentIntentRequest, response: { 200: PaymentIntentResponse } },
  }, async (req, reply) => {
    req.govAgentId = req.body.agent_id;
    assertSdkVersion(req.body.sdk_version, deps.settings.minSdkVersion);
    const res = await deps.payments.submit(req.body);
    req.govOutcome = res.decision.outcome;
    if (res.replayed) reply.header('idempotent-replayed', 'true');
    return responseForTier(res, req.principal);
  });
};
