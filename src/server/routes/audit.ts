import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { AuditListQuery, AuditListResponse, AuditRowWithPayloadView, ChainVerifyResponse } from '../../contracts/audit.js';
import { EnvelopeId } from '../../contracts/common.js';
import { AppError } from '../app-error.js';
import { rowForTier, rowWithPayloadForTier } from '../score-view.js';
import type { AppDeps } from '../app.js';

export const auditRoutes = (deps: AppDeps): FastifyPluginAsyncZod => async (app) => {
  app.get('/v1/audit/executions', {
    config: { capability: 'audit.read' },
    schema: { tags: ['audit'], summary: 'List audit rows, newest first', querystring: AuditListQuery, response: { 200: AuditListResponse } },
  }, async (req) => {
    const page = await deps.ledger.list(req.query);
    return { ...page, items: page.items.map((r) => rowForTier(r, req.principal)) };
  });

  app.get('/v1/audit/executions/:id', {
    config: { capability: 'audit.read' },
    schema: { tags: ['audit'], summary: 'One audit row with its payload', params: z.object({ id: z.string().max(100) }), response: { 200: AuditRowWithPayloadView } },
  }, async (req) => {
    const row = EnvelopeId.safeParse(req.params.id).success ? await deps.ledger.get(req.params.id) : null;
    if (row === null) throw new AppError('not_found', `no audit row with envelope id ${req.params.id}`);
    return rowWithPayloadForTier(row, req.principal);
  });

  app.get('/v1/audit/chain/verify', {
    config: { capability: 'audit.verify' },
    schema: { tags: ['audit'], summary: 'Verify the hash chain', response: { 200: ChainVerifyResponse } },
  }, async () => deps.ledger.verify({ bySource: true }));
};
