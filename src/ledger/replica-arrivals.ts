import { CLIENT_TIMESTAMP_MAX_SKEW_MS } from '../contracts/runtime.js';
import { matches, SINCE_CLOCK_SKEW_MS, type ListPlan } from './audit-query.js';
import type { ListedRow, Position } from './port.js';
import type { FreshRow } from './replica-batch.js';
import { LedgerIntegrityError } from './errors.js';
import { readAuditRow } from './row-reader.js';

/**
 * One replicated row in the arrival index of an LMDB or memory central store, under its position [h, r]
 * (ledger/port.ts): where the row is, and the columns the listing filters on, so that a filtered page reads
 * only the rows it returns.
 */
export interface ArrivalEntry {
  source: string;
  seq: number;
  /** When the store took the row (its clock, ms). */
  at: number;
  agent_id: string;
  decision: string;
  phase: string;
  /** The row's own timestamp (the writer's clock, ms). */
  ts: number;
}

export function arrivalEntry(source: string, row: FreshRow, at: number): ArrivalEntry {
  return { source, seq: row.seq, at, agent_id: row.agentId, decision: row.decision, phase: row.phase, ts: row.tsMs };
}

/** How far a row's own time may lie ahead of its arrival: the writer's clock, and a client dating its call ahead. */
const ARRIVAL_SLACK_MS = SINCE_CLOCK_SKEW_MS + CLIENT_TIMESTAMP_MAX_SKEW_MS;

/**
 * Up to limit + 1 matches from arrival entries given newest first, all below the plan's bound. `since`
 * compares the row's timestamp; the scan stops once arrivals are older than `since` by more than
 * ARRIVAL_SLACK_MS, since a row arrives after it was written.
 */

export function collectArrivals(
  descending: Iterable<readonly [Position, ArrivalEntry]>,
  plan: ListPlan,
  bytesOf: (e: ArrivalEntry) => Buffer | undefined,
): ListedRow[] {
  const out: ListedRow[] = [];
  for (const [position, e] of descending) {
    if (plan.sinceMs !== undefined) {
      if (e.at < plan.sinceMs - ARRIVAL_SLACK_MS) break;
      if (e.ts < plan.sinceMs) continue;
    }
    if (!matches(e, e.source, plan)) continue;
    const bytes = bytesOf(e);
    if (bytes === undefined) throw new LedgerIntegrityError(`replicated row ${e.seq} of source ${e.source} is indexed but missing`, e.seq);
    out.push({ row: readAuditRow(bytes, e.seq), position });
    if (out.length > plan.limit) break;
  }
  return out;
}
