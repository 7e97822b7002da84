import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { Transform, pipeline, type Readable } from 'node:stream';
import { createGunzip } from 'node:zlib';
import { IngestRequest, IngestResponse, type IngestRejection } from '../../contracts/replication.js';
import type { ReplicaStore, StoredRow } from '../../ledger/port.js';
import { IngestRejectedError } from '../../ledger/replica-batch.js';
import { sourceAllowed, type IngestSourceRules } from '../../config/ingest-sources.js';
import { AppError } from '../app-error.js';
import type { Principal } from '../authenticators.js';
import type { AppDeps } from '../app.js';

/**
 * Counts the decompressed bytes and fails with 413 past the limit, so a small gzip body cannot make the
 * gateway inflate gigabytes (Fastify's own bodyLimit stops reading, not the decompression).
 */
function inflateBounded(payload: Readable, limit: number): Readable {
  let inflated = 0;
  const bound = new Transform({
    transform(chunk: Buffer, _enc, done) {
      inflated += chunk.length;
      if (inflated > limit) done(Object.assign(new Error(`the decompressed body is larger than ${limit} bytes`), { statusCode: 413, code: 'FST_ERR_CTP_BODY_TOO_LARGE' }));
      else done(null, chunk);
    },
  });
  const out = pipeline(payload, createGunzip(), bound, (err) => {
    if (err && (err as { statusCode?: number }).statusCode === undefined) Object.assign(err, { statusCode: 400 });
  });
  // Fastify compares the bytes received on the wire, not the inflated ones, with Content-Length.
  let encoded = 0;
  payload.on('data', (chunk: Buffer) => {
    encoded += chunk.length;
    (out as Readable & { receivedEncodedLength?: number }).receivedEncodedLength = encoded;
  });
  return out;
}

/**
 * The caller's binding: its subject's entry in GOV_INGEST_SOURCES, else its JWT's `sources` claim, else
 * (bound nowhere) whatever GOV_INGEST_SOURCES says of unbound callers. 403 names the source, not the globs.
 */
function mayWrite(rules: IngestSourceRules, principal: Principal | null, source: string): void {
  const globs = principal === null ? null : (rules.globsFor(principal.subject) ?? principal.sources ?? null);
  if (globs === null ? rules.unboundMayWrite : sourceAllowed(source, globs)) return;
  throw new AppError('forbidden', `this key may not write source ${source} (GOV_INGEST_SOURCES, or the token's sources claim)`, { source });
}

/**
 * POST /v1/audit/ingest on the central gateway: a sidecar ships its ledger rows with its own key
 * (capability audit.ingest) and never holds database credentials. The store verifies each batch before
 * storing any of it; a batch that would break its source's chain is answered 409 (422 for bytes that are
 * not ledger rows) naming the first bad seq, logged and counted, and stored not at all.
 */
export const ingestRoutes = (deps: AppDeps & { replicas: ReplicaStore }): FastifyPluginAsyncZod => async (app) => {
  const limit = deps.settings.ingestMaxBytes;
  app.post('/v1/audit/ingest', {
    config: { capability: 'audit.ingest' },
    bodyLimit: limit,
    preParsing: async (req, _reply, payload) => {
      const encoding = req.headers['content-encoding'];
      if (encoding === undefined || encoding === 'identity') return payload;
      if (encoding !== 'gzip') throw new AppError('unsupported_media_type', `content-encoding ${String(encoding)} is not accepted; send gzip or identity`);
      return inflateBounded(payload, limit);
    },
    schema: { tags: ['audit'], summary: 'Store a batch of a sidecar\'s ledger rows (replication)', body: IngestRequest, response: { 200: IngestResponse } },
  }, async (req) => {
    const { source } = req.body;
    mayWrite(deps.settings.ingestSources, req.principal, source);
    const rows: StoredRow[] = req.body.rows.map((r) => ({ seq: r.seq, bytes: Buffer.from(r.row, 'base64') }));
    try {
      const result = await deps.replicas.ingest(source, rows);
      if (result.stored > 0) deps.metrics.ingestRows.inc({ result: 'stored' }, result.stored);
      if (result.duplicates > 0) deps.metrics.ingestRows.inc({ result: 'duplicate' }, result.duplicates);
      return result;
    } catch (e) {
      if (!(e instanceof IngestRejectedError)) throw e;
      deps.metrics.ingestRejected.inc({ reason: e.reason });
      const head = await deps.replicas.head(source);
      // The alarm: a refused batch means a sidecar's chain and the central one disagree (or bytes were altered).
      req.log.error({ source, reason: e.reason, first_bad_seq: e.firstBadSeq, stored_head_seq: head.seq, principal: req.principal?.subject }, 'replicated batch refused: it would break the source chain');
      const details: IngestRejection = { source, reason: e.reason, first_bad_seq: e.firstBadSeq, head };
      throw new AppError(e.reason === 'malformed' ? 'validation_failed' : 'conflict', e.message, details);
    }
  });
};
