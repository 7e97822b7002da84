import type { AuditListQuery } from '../contracts/audit.js';
import { CLIENT_TIMESTAMP_MAX_AGE_MS, CLIENT_TIMESTAMP_MAX_SKEW_MS } from '../contracts/runtime.js';
import type { Ledger, ListPage, ListedRow, Position, ReplicaStore } from './port.js';
import { readAuditRow } from './row-reader.js';

const DEFAULT_LIMIT = 50;

/**
 * How far a replicated row's timestamp (the sidecar's clock) may run ahead of its arrival (the central
 * store's clock) before a `since` scan over arrivals, which stops at the first arrival older than
 * `since` minus this, could miss it.
 */
export const SINCE_CLOCK_SKEW_MS = 5 * 60_000;

export interface ListPlan {
  limit: number;
  agentId: string | undefined;
  source: string | undefined;
  outcome: string | undefined;
  sinceMs: number | undefined;
  /** Only rows of this phase; undefined: every phase but `policy` (policy changes are no executions). */
  phase: string | undefined;
  /** Only rows whose position is strictly below this (the cursor); null: from the newest. */
  below: Position | null;
}

/**
 * A cursor is the position of the last row of the previous page: `a` for [a, 0], `a-b` for [a, b]
 * (ledger/port.ts, Position). Opaque to callers.
 */
const CURSOR = /^([0-9]{1,15})(?:-([0-9]{1,15}))?$/;

export function parseCursor(cursor: string): Position {
  const m = CURSOR.exec(cursor);
  if (!m) throw new RangeError('cursor must be a value returned as next_cursor');
  return [Number(m[1]), m[2] === undefined ? 0 : Number(m[2])];
}

export function formatCursor(p: Position): string {
  return p[1] === 0 ? String(p[0]) : `${p[0]}-${p[1]}`;
}

/** Normalises a list query; throws RangeError for a cursor or `since` the contract would refuse. */
export function planList(q: Partial<AuditListQuery>): ListPlan {
  const limit = q.limit === undefined ? DEFAULT_LIMIT : Math.max(1, Math.floor(q.limit));
  const below = q.cursor !== undefined && q.cursor !== null && q.cursor !== '' ? parseCursor(q.cursor) : null;
  let sinceMs: number | undefined;
  if (q.since !== undefined) {
    sinceMs = Date.parse(q.since);
    if (Number.isNaN(sinceMs)) throw new RangeError('since must be an ISO 8601 date-time');
  }
  return { limit, agentId: q.agent_id, source: q.source, outcome: q.outcome, sinceMs, phase: q.phase, below };
}

/**
 * The exclusive upper bound, as a number, for rows whose position is [n, 0] (a store's own rows, and every
 * row of the central PostgreSQL store): [n, 0] < [a, b] exactly when n < a, or n = a and b > 0.
 */
export function ownBelow(plan: ListPlan): number {
  if (plan.below === null) return Number.MAX_SAFE_INTEGER;
  return plan.below[1] > 0 ? plan.below[0] + 1 : plan.below[0];
}

export function comparePositions(a: Position, b: Position): number {
  return a[0] - b[0] || a[1] - b[1];
}

/** Whether a row passes the plan's filters other than `since` and the cursor. */
export function matches(row: { agent_id: string; decision: string; phase: string }, source: string | null, plan: ListPlan): boolean {
  if (plan.agentId !== undefined && row.agent_id !== plan.agentId) return false;
  if (plan.source !== undefined && source !== plan.source) return false;
  if (plan.outcome !== undefined && row.decision !== plan.outcome) return false;
  return plan.phase === undefined ? row.phase !== 'policy' : row.phase === plan.phase;
}

/**
 * How far below `since` a scan in append order must look before nothing further down can match: a row
 * carries its call's own time when a client chose it (a buffered call replayed), up to
 * CLIENT_TIMESTAMP_MAX_AGE_MS behind its append and CLIENT_TIMESTAMP_MAX_SKEW_MS ahead of it.
 */
export const SINCE_SCAN_SLACK_MS = CLIENT_TIMESTAMP_MAX_AGE_MS + CLIENT_TIMESTAMP_MAX_SKEW_MS;

/**
 * Up to limit + 1 matches from rows given in descending seq order, all below the plan's bound. Stops at
 * the first row older than `since` by more than SINCE_SCAN_SLACK_MS: a ledger appends in time order but
 * for rows whose time a client chose, and those lie within that slack. The extra match tells the page
 * whether anything is left.
 */
export function collectRows(rowsDescending: Iterable<readonly [number, Buffer]>, plan: ListPlan): ListedRow[] {
  const out: ListedRow[] = [];
  for (const [seq, bytes] of rowsDescending) {
    const row = readAuditRow(bytes, seq);
    if (plan.sinceMs !== undefined) {
      const ts = Date.parse(row.timestamp);
      if (ts < plan.sinceMs - SINCE_SCAN_SLACK_MS) break;
      if (ts < plan.sinceMs) continue;
    }
    if (!matches(row, row.source, plan)) continue;
    out.push({ row, position: [seq, 0] });
    if (out.length > plan.limit) break;
  }
  return out;
}

/**
 * One page, newest first, from the rows of several streams each given newest first (limit + 1 at most
 * from each): the first `limit` by position, and a cursor exactly when more rows are left.
 */
export function pageOf(streams: ListedRow[][], limit: number): ListPage {
  const all = streams.length === 1 ? streams[0] : streams.flat().sort((a, b) => comparePositions(b.position, a.position));
  const items = all.slice(0, limit);
  const more = all.length > limit;
  return { items: items.map((r) => r.row), next_cursor: more ? formatCursor(items[items.length - 1].position) : null };
}

/**
 * GET /v1/audit/executions: the store's own rows and, on a central gateway, every row replicated to it,
 * newest first by position (arrival), with one cursor across both.
 */
export async function listAudit(ledger: Ledger, replicas: ReplicaStore | undefined, query: Partial<AuditListQuery>): Promise<ListPage> {
  const plan = planList(query);
  const streams = await Promise.all(replicas ? [ledger.listRows(plan), replicas.listRows(plan)] : [ledger.listRows(plan)]);
  return pageOf(streams, plan.limit);
}

/** Ledger.list(): the own rows only. */
export async function listOwn(ledger: Pick<Ledger, 'listRows'>, query: Partial<AuditListQuery>): Promise<ListPage> {
  const plan = planList(query);
  return pageOf([await ledger.listRows(plan)], plan.limit);
}
