import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import picomatch from 'picomatch';
import type { z } from 'zod';
import { AgentListQuery, AgentListResponse, AgentParams, Manifest, ManifestResponse, ReliabilityResponse } from '../../contracts/manifest.js';
import type { AgentStats } from '../../ledger/port.js';
import { reliabilityFromStats } from '../../engine/reliability.js';
import { OutputSchemaError } from '../../policy/output-schema.js';
import { AppError } from '../app-error.js';
import type { AppDeps } from '../app.js';

type AgentItem = z.infer<typeof AgentListResponse>['items'][number];

/**
 * One page of the agent list: the registry's agents and the ledger's, merged in id order (both are
 * sorted), filtered by the glob, and read lazily so a page costs about its own size.
 */
async function agentPage(deps: AppDeps, query: AgentListQuery): Promise<z.infer<typeof AgentListResponse>> {
  const after = query.cursor;
  const matches = query.agent_id === undefined ? null : picomatch(query.agent_id, { dot: true });
  const registered = deps.manifests.list().filter((m) => after === undefined || m.agent_id > after);
  const fromLedger = deps.ledger.agents(after)[Symbol.asyncIterator]();
  let next = await fromLedger.next();
  let i = 0;
  const items: AgentItem[] = [];
  const item = (agentId: string, stats: AgentStats | null, m: (typeof registered)[number] | null): AgentItem => ({
    agent_id: agentId,
    manifest: m?.manifest ?? null,
    source: m?.source ?? null,
    updated_at: m?.updated_at ?? null,
    last_activity: stats?.last_activity ?? null,
    executions: stats?.executions ?? 0,
  });
  try {
    while (items.length <= query.limit) {
      const fromReg = i < registered.length ? registered[i] : null;
      const led = next.done ? null : next.value;
      if (fromReg === null && led === null) break;
      let out: AgentItem;
      if (led === null || (fromReg !== null && fromReg.agent_id < led[0])) {
        out = item(fromReg!.agent_id, null, fromReg);
        i++;
      } else if (fromReg !== null && fromReg.agent_id === led[0]) {
        out = item(led[0], led[1], fromReg);
        i++;
        next = await fromLedger.next();
      } else {
        out = item(led[0], led[1], null);
        next = await fromLedger.next();
      }
      if (matches === null || matches(out.agent_id)) items.push(out);
    }
  } finally {
    // Ends the ledger's walk that the page left unfinished (no further range reads or queries).
    await fromLedger.return?.();
  }
  const more = items.length > query.limit;
  if (more) items.length = query.limit;
  return { items, next_cursor: more ? items[items.length - 1].agent_id : null };
}

export const agentRoutes = (deps: AppDeps): FastifyPluginAsyncZod => async (app) => {
  app.get('/v1/agents', {
    config: { capability: 'agents.read' },
    schema: {
      tags: ['agents'],
      summary: 'Registered agents: manifest, last activity and executions, in id order',
      querystring: AgentListQuery,
      response: { 200: AgentListResponse },
    },
  }, async (req) => agentPage(deps, req.query));

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
    const stats = await deps.ledger.agentStats(req.params.agent_id);
    return { agent_id: req.params.agent_id, reliability: reliabilityFromStats(stats), executions: stats.executions };
  });
};
