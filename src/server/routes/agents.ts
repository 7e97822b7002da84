import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { AgentParams, Manifest, ManifestResponse, ReliabilityResponse } from '../../contracts/manifest.js';
import { reliabilityFromStats } from '../../engine/reliability.js';
import { OutputSchemaError } from '../../policy/output-schema.js';
import { AppError } from '../app-error.js';
import type { AppDeps } from '../app.js';

export const agentRoutes = (deps: AppDeps): FastifyPluginAsyncZod => async (app) => {
  app.put('/v1/agents/:agent_id/manifest', {
    config: { capability: 'agents.write' },
    schema: { tags: ['agents'], summary: 'Register the tools an agent may call', params: AgentParams, body: Manifest, response: { 200: ManifestResponse } },
  }, async (req) => {
    try {
      await deps.manifests.put(req.params.agent_id, req.body, deps.clock());
    } catch (e) {
      if (e instanceof OutputSchemaError) throw new AppError('validation_failed', e.message);
      throw e;
    }
    return deps.manifests.describe(req.params.agent_id)!;
  });

  app.get('/v1/agents/:agent_id/manifest', {
    config: { capability: 'agents.read' },
    schema: { tags: ['agents'], summary: 'The agent manifest in force', params: AgentParams, response: { 200: ManifestResponse } },
  }, async (req) => {
    const m = deps.manifests.describe(req.params.agent_id);
    if (m === null) throw new AppError('not_found', `agent ${req.params.agent_id} has no manifest`);
    return m;
  });

  app.get('/v1/agents/:agent_id/reliability', {
    config: { capability: 'agents.read' },
    schema: { tags: ['agents'], summary: 'Historical reliability of an agent', params: AgentParams, response: { 200: ReliabilityResponse } },
  }, async (req) => {
    const stats = deps.ledger.agentStats(req.params.agent_id);
    return { agent_id: req.params.agent_id, reliability: reliabilityFromStats(stats), executions: stats.executions };
  });
};
