import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { Capability } from '../capabilities.js';
import type { AppDeps } from '../app.js';

/**
 * Spec routes whose features no deployment includes yet. They exist so that the capability matrix answers
 * them truthfully: 403 below the feature's tier, 402 (not entitled in this deployment) at or above it.
 */
const GUARDED: Array<{ method: 'GET' | 'POST' | 'DELETE' | 'PUT'; url: string; capability: Capability }> = [
  { method: 'DELETE', url: '/v1/audit/executions/:id/pii', capability: 'audit.erase' },
  { method: 'POST', url: '/v1/certify/agent', capability: 'certify' },
  { method: 'GET', url: '/v1/analytics/*', capability: 'analytics' },
  { method: 'GET', url: '/v1/insights/*', capability: 'analytics' },
  { method: 'GET', url: '/v1/search/*', capability: 'analytics' },
  { method: 'GET', url: '/v1/dashboard/*', capability: 'analytics' },
  { method: 'POST', url: '/v1/feedback', capability: 'analytics' },
  { method: 'GET', url: '/v1/alerts/*', capability: 'alerts' },
  { method: 'GET', url: '/v1/reports/*', capability: 'reports' },
  { method: 'GET', url: '/v1/team/*', capability: 'team' },
  { method: 'GET', url: '/v1/sso/*', capability: 'sso' },
  { method: 'POST', url: '/v1/sso/*', capability: 'sso' },
  { method: 'POST', url: '/v1/runtime/judge/:envelope_id', capability: 'judge' },
];

export const featureRoutes = (_deps: AppDeps): FastifyPluginAsyncZod => async (app) => {
  for (const r of GUARDED) {
    // The auth hook answers 403 or 402 before this handler can run; it is reached only if a deployment
    // granted the entitlement without shipping the feature.
    app.route({ method: r.method, url: r.url, config: { capability: r.capability }, schema: { hide: true }, handler: async (_req, reply) => reply.code(501).send({ error: { code: 'not_implemented', message: `${r.capability} is not implemented` } }) });
  }
};
