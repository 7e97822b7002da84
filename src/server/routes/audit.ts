import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { AuditListQuery, AuditListResponse, AuditRowWithPayload, ChainVerifyResponse } from '../../contracts/audit.js';
import { EnvelopeId } from '../../contracts/common.js';
import { AppError } from '../app-error.js';
import type { AppDeps } from '../app.js';

export const auditRoutes = (deps: AppDeps): FastifyPluginAsyncZod => async (app) => {
  app.get('/v1/audit/executions', {
    config: { capability: 'audit.read' },
    schema: { tags: ['audit'], summary: 'List audit rows, newest first', querystring: AuditListQuery, response: { 200: AuditListResponse } },
  }, async (req) => deps.ledger.list(req.query));

  app.get('/v1/audit/executions/:id', {
    config: { capability: 'audit.read' },
    schema: { tags: ['audit'], summary: 'One audit row with its payload', params: z.object({ id: z.string().max(100) }), response: { 200: AuditRowWithPayload } },
  }, async (req) => {
    const row = EnvelopeId.safeParse(req.params.id).success ? await deps.ledger.get(req.params.id) : null;
    if (row === null) throw new AppError('not_found', `no audit row with envelope id ${req.params.id}`);
    return row;
  });

  app.get('/v1/audit/chain/verify', {
    config: { capability: 'audit.verify' },
    schema: { tags: ['audit'], summary: 'Verify the hash chain', response: { 200: ChainVerifyResponse } },
  }, async () => deps.ledger.verify());
};
