import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { AuditListQuery, AuditListResponse, AuditRowWithPayloadView, ChainVerifyReport } from '../../contracts/audit.js';
import { EnvelopeId } from '../../contracts/common.js';
import { listAudit } from '../../ledger/audit-query.js';
import { AppError } from '../app-error.js';
import { rowForTier, rowWithPayloadForTier } from '../score-view.js';
import type { AppDeps } from '../app.js';

export const auditRoutes = (deps: AppDeps): FastifyPluginAsyncZod => async (app) => {
  app.get('/v1/audit/executions', {
    config: { capability: 'audit.read' },
    schema: { tags: ['audit'], summary: 'List audit rows newest first: on a central gateway, its own and every row replicated to it', querystring: AuditListQuery, response: { 200: AuditListResponse } },
  }, async (req) => {
    const page = await listAudit(deps.ledger, deps.replicas, req.query);
    return { ...page, items: page.items.map((r) => rowForTier(r, req.principal)) };
  });

  app.get('/v1/audit/executions/:id', {
    config: { capability: 'audit.read' },
    schema: { tags: ['audit'], summary: 'One audit row with its payload', params: z.object({ id: z.string().max(100) }), response: { 200: AuditRowWithPayloadView } },
  }, async (req) => {
    const id = req.params.id;
    const row = EnvelopeId.safeParse(id).success ? ((await deps.ledger.get(id)) ?? (await deps.replicas?.get(id)) ?? null) : null;
    if (row === null) throw new AppError('not_found', `no audit row with envelope id ${id}`);
    return rowWithPayloadForTier(row, req.principal);
  });

  app.get('/v1/audit/chain/verify', {
    config: { capability: 'audit.verify' },
    schema: { tags: ['audit'], summary: 'Verify the hash chains: every source chain of the store and, on a central gateway, every replicated sidecar chain', response: { 200: ChainVerifyReport } },
  }, async () => {
    const [own, replicated] = await Promise.all([deps.ledger.verify({ bySource: true }), deps.replicas?.verify()]);
    if (replicated === undefined || replicated.length === 0) return own;
    // The top-level fields sum up every chain the store holds, written here or replicated to it.
    const invalid = replicated.find((c) => !c.valid);
    return {
      ...own,
      valid: own.valid && invalid === undefined,
      rows_checked: own.rows_checked + replicated.reduce((n, c) => n + c.rows_checked, 0),
      first_invalid_seq: own.valid && invalid !== undefined ? invalid.first_invalid_seq : own.first_invalid_seq,
      sources: [...(own.sources ?? []), ...replicated],
    };
  });
};
