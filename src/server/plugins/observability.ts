import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { agentLabel, type GovMetrics } from '../../telemetry/metrics.js';

declare module 'fastify' {
  interface FastifyRequest {
    startedAt: number;
    /** Set by runtime routes so the access log carries the outcome. */
    govOutcome: string | null;
    govAgentId: string | null;
  }
}

/**
 * One access-log line and the request metrics per request. Route templates (never raw ids) label the
 * metrics; logs carry request id, agent and outcome, never bodies or headers (tokens live there).
 */
export const observabilityPlugin = fp(async (app: FastifyInstance, opts: { metrics: GovMetrics }) => {
  app.decorateRequest('startedAt', 0);
  app.decorateRequest('govOutcome', null);
  app.decorateRequest('govAgentId', null);
  app.addHook('onRequest', async (req) => {
    req.startedAt = performance.now();
  });
  app.addHook('onResponse', async (req, reply) => {
    const ms = performance.now() - req.startedAt;
    const path = req.routeOptions.url ?? 'unmatched';
    const agent = agentLabel(req.headers['x-agent-id'] ?? req.govAgentId);
    opts.metrics.recordRequest(path, reply.statusCode, agent, ms);
    req.log.info({ method: req.method, path, status: reply.statusCode, agent_id: agent, outcome: req.govOutcome ?? undefined, ms: Math.round(ms * 100) / 100 }, 'request');
  });
});
