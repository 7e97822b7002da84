import { z } from 'zod';
import { SourceId } from './audit.js';

/** Rows per ingest batch the endpoint takes at most (the sidecar's GOV_REPLICATION_BATCH_ROWS is capped by it). */
export const MAX_INGEST_ROWS = 10_000;

/** One ledger row as its writer stored it (docs/ledger.md, "Row format"), base64. */
export const IngestRow = z.object({
  seq: z.number().int().positive(),
  row: z.string().min(1).max(64 * 1024 * 1024).regex(/^[A-Za-z0-9+/]*={0,2}$/, 'row must be base64'),
});

/** POST /v1/audit/ingest: consecutive rows of one source's chain (gzip with Content-Encoding: gzip). */
export const IngestRequest = z.object({
  source: SourceId,
  rows: z.array(IngestRow).min(1).max(MAX_INGEST_ROWS),
});
export type IngestRequest = z.infer<typeof IngestRequest>;

export const SourceHeadView = z.object({ seq: z.number().int().min(0), hash: z.string().nullable() });

/**
 * The acknowledgement: `head` is the source's stored head after the batch, the same for a batch sent
 * again after a lost answer (then every row counts as a duplicate and nothing is stored twice).
 */
export const IngestResponse = z.object({
  source: z.string(),
  stored: z.number().int().min(0),
  duplicates: z.number().int().min(0),
  head: SourceHeadView,
});
export type IngestResponse = z.infer<typeof IngestResponse>;

/** `error.details` of a refused batch (409, or 422 for rows that are not ledger rows at all). */
export const IngestRejection = z.object({
  source: z.string(),
  reason: z.enum(['malformed', 'gap', 'chain_break', 'conflict', 'foreign_source']),
  first_bad_seq: z.number().int(),
  /** The source's stored head, from which a sidecar whose cursor ran ahead of it resumes. */
  head: SourceHeadView,
});
export type IngestRejection = z.infer<typeof IngestRejection>;
