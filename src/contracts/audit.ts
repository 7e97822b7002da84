import { z } from 'zod';
import { EnvelopeId, Outcome, RiskTier } from './common.js';

/**
 * `policy`: a policy change (a pack version published, activated or deactivated), written by
 * runtime/policy-registry.ts with agent_id `gov:policy`; it is no execution and counts in no agent's stats.
 */
export const Phase = z.enum(['validate', 'pre_check', 'post_check', 'decision', 'policy']);
export type Phase = z.infer<typeof Phase>;

/**
 * What a source id may be (GOV_SOURCE_ID): it names the sidecar or replica that wrote a row, and each
 * source keeps its own chain in the central store later, so it is short and plain.
 */
export const SourceId = z.string().regex(/^[A-Za-z0-9][\w.:@-]{0,127}$/, 'a source id is 1-128 letters, digits and _ . : @ - starting with a letter or digit');

/** The header fields that the hash chain covers in canonical form. */
export const RowHeader = z.object({
  seq: z.number().int().positive(),
  envelope_id: EnvelopeId,
  phase: Phase,
  agent_id: z.string(),
  decision: Outcome,
  risk_tier: RiskTier,
  confidence: z.number().nullable(),
  timestamp: z.string(),
  parent_envelope_id: z.string().nullable(),
  policy_version: z.string(),
  score_version: z.string(),
  /**
   * The sidecar or replica that wrote the row (its GOV_SOURCE_ID). null on rows written before rows carried
   * a source: their hashed header has no `source` key, and they verify as they were written.
   */
  source: z.string().nullable(),
});
export type RowHeader = z.infer<typeof RowHeader>;

export const AuditRow = RowHeader.extend({
  prev_hash: z.string(),
  hash: z.string(),
  commitment: z.string(),
  encrypted: z.boolean(),
});
export type AuditRow = z.infer<typeof AuditRow>;

export const AuditRowWithPayload = AuditRow.extend({
  payload: z.unknown().nullable(),
});
export type AuditRowWithPayload = z.infer<typeof AuditRowWithPayload>;

/**
 * A row as the API returns it: `confidence` and `risk_tier` are null for a caller whose tier may not view
 * scores (the `scores.view` capability, docs/tiers.md); the chain covers the stored values.
 */
export const AuditRowView = AuditRow.extend({ risk_tier: RiskTier.nullable() });
export const AuditRowWithPayloadView = AuditRowWithPayload.extend({ risk_tier: RiskTier.nullable() });

export const AuditListQuery = z.object({
  limit: z.coerce.number().int().min(1).max(1000).default(50),
  agent_id: z.string().max(200).optional(),
  /** Only rows written by this source (a sidecar or gateway replica, GOV_SOURCE_ID). */
  source: SourceId.optional(),
  outcome: Outcome.optional(),
  /** Only rows of this phase. Without it, every phase but `policy`: policy changes are listed with phase=policy. */
  phase: Phase.optional(),
  since: z.iso.datetime({ offset: true }).optional(),
  /** The previous page's next_cursor: opaque (a position in the store's arrival order, ledger/audit-query.ts). */
  cursor: z.string().regex(/^[0-9]{1,15}(-[0-9]{1,15})?$/, 'cursor must be a value returned as next_cursor').optional(),
});
export type AuditListQuery = z.infer<typeof AuditListQuery>;

export const AuditListResponse = z.object({
  items: z.array(AuditRowView),
  next_cursor: z.string().nullable(),
});

export const AuditIdParams = z.object({ id: EnvelopeId });

/** The verification of one chain. */
export const ChainCheck = z.object({
  valid: z.boolean(),
  rows_checked: z.number().int(),
  first_invalid_seq: z.number().int().nullable(),
  head_hash: z.string().nullable(),
});

/** One source's chain in a store that keeps a chain per source (the central PostgreSQL store). */
export const SourceChainCheck = ChainCheck.extend({ source: z.string() });
export type SourceChainCheck = z.infer<typeof SourceChainCheck>;

export const ChainVerifyResponse = ChainCheck.extend({
  /**
   * The head anchor kept outside the ledger (docs/ledger.md), when one is configured: `match`, `missing`
   * (no anchor written yet), `truncated` (the chain ends before the anchored seq), `mismatch` (the row at
   * the anchored seq hashes otherwise), `unsigned` or `forged` (its HMAC is absent or wrong).
   */
  anchor: z.object({ status: z.enum(['match', 'missing', 'unsigned', 'forged', 'mismatch', 'truncated']), seq: z.number().int().nullable() }).optional(),
  /**
   * Every source chain of a store that keeps one per source (PostgreSQL, docs/ledger.md), in source order;
   * absent for a ledger that is one chain (LMDB, memory). The fields above then sum them up: `valid` only
   * when every chain is, `rows_checked` over all of them, and `first_invalid_seq` and `head_hash` of the
   * first invalid chain, or, when all are valid, of the answering replica's own source (its head).
   */
  sources: z.array(SourceChainCheck).optional(),
});
export type ChainVerifyResponse = z.infer<typeof ChainVerifyResponse>;

/** One replicated source chain in a central gateway's store, verified like the gateway's own chain. */
export const SourceChainVerify = ChainVerifyResponse.omit({ anchor: true }).extend({ source: z.string() });

/**
 * GET /v1/audit/chain/verify: the top-level fields are this process's own chain; a central gateway adds
 * `sources`, every chain replicated to it from sidecars (docs/deployment.md, "Replication").
 */
export const ChainVerifyReport = ChainVerifyResponse.extend({ sources: z.array(SourceChainVerify).optional() });
export type ChainVerifyReport = z.infer<typeof ChainVerifyReport>;
