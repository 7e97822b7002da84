import type { AuditListQuery } from '../contracts/audit.js';
import type { ListPage } from './port.js';
import { readAuditRow } from './row-reader.js';

const DEFAULT_LIMIT = 50;

export interface ListPlan {
  limit: number;
  agentId: string | undefined;
  source: string | undefined;
  outcome: string | undefined;
  sinceMs: number | undefined;
  /** Only rows of this phase; undefined: every phase but `policy` (policy changes are no executions). */
  phase: string | undefined;
  /** Scan rows with seq strictly below this. */
  below: number;
}

/** Normalises a list query against the current head seq. */
export function planList(q: Partial<AuditListQuery>, headSeq: number): ListPlan {
  const limit = q.limit === undefined ? DEFAULT_LIMIT : Math.max(1, Math.floor(q.limit));
  let below = headSeq + 1;
  if (q.cursor !== undefined && q.cursor !== null && q.cursor !== '') {
    const c = Number(q.cursor);
    if (!Number.isSafeInteger(c) || c < 0) throw new RangeError('cursor must be a value returned as next_cursor');
    below = Math.min(below, c);
  }
  let sinceMs: number | undefined;
  if (q.since !== undefined) {
    sinceMs = Date.parse(q.since);
    if (Number.isNaN(sinceMs)) throw new RangeError('since must be an ISO 8601 date-time');
  }
  return { limit, agentId: q.agent_id, source: q.source, outcome: q.outcome, sinceMs, phase: q.phase, below };
}

/**
 * Newest-first page from rows given in descending seq order (all below plan.below). Stops at the
 * first row older than `since`: rows are appended in time order, so nothing further down can match.
 * Reads one match past the limit so that next_cursor is null exactly when nothing is left.
 */
export function collectPage(rowsDescending: Iterable<readonly [number, Buffer]>, plan: ListPlan): ListPage {
  const items = [];
  for (const [seq, bytes] of rowsDescending) {
    const row = readAuditRow(bytes, seq);
    if (plan.sinceMs !== undefined && Date.parse(row.timestamp) < plan.sinceMs) break;
    if (plan.agentId !== undefined && row.agent_id !== plan.agentId) continue;
    if (plan.source !== undefined && row.source !== plan.source) continue;
    if (plan.outcome !== undefined && row.decision !== plan.outcome) continue;
    if (plan.phase === undefined ? row.phase === 'policy' : row.phase !== plan.phase) continue;
    if (items.length === plan.limit) {
      return { items, next_cursor: String(items[items.length - 1].seq) };
    }
    items.push(row);
  }
  return { items, next_cursor: null };
}
