import type pg from 'pg';
import type { SourceChainCheck } from '../contracts/audit.js';
import { isSafeString } from '../contracts/json-data.js';
import { ownBelow, type ListPlan } from './audit-query.js';
import { ChainWalker } from './chain.js';
import type { ListedRow } from './port.js';
import { readAuditRow } from './row-reader.js';

/**
 * Whether PostgreSQL's text type can hold `s` as it is: no NUL, and no lone surrogate (the driver would
 * send U+FFFD in its place, so a column would differ from the hashed header, which JSON escapes it in).
 * The API refuses such strings before any store sees them (contracts/json-data.ts); this guards the
 * callers that are not HTTP requests.
 */
export function storable(s: string | null | undefined): boolean {
  return typeof s !== 'string' || isSafeString(s);
}

/**
 * The statement of one table's share of a page of GET /v1/audit/executions: newest first by `id` (arrival
 * order, one sequence for both tables), every filter a column with an index that keeps that order
 * (migrations/0001_init.sql and 0003_replica_listing.sql: source, agent_id and decision each with id; ts),
 * reading one row past the limit.
 */
export function listStatement(plan: ListPlan, table: 'gov_audit_rows' | 'gov_replica_rows'): { text: string; values: unknown[] } {
  const where: string[] = [];
  const values: unknown[] = [];
  const add = (sql: string, v: unknown) => {
    values.push(v);
    where.push(sql.replace('?', `$${values.length}`));
  };
  if (plan.below !== null) add('id < ?', ownBelow(plan));
  if (plan.source !== undefined) add('source = ?', plan.source);
  if (plan.agentId !== undefined) add('agent_id = ?', plan.agentId);
  if (plan.outcome !== undefined) add('decision = ?', plan.outcome);
  if (plan.sinceMs !== undefined) add('ts >= to_timestamp(?::bigint / 1000.0)', plan.sinceMs);
  if (plan.phase !== undefined) add('phase = ?', plan.phase);
  else where.push(`phase <> 'policy'`);
  values.push(plan.limit + 1);
  return { text: `SELECT id, seq, row_bytes FROM ${table} WHERE ${where.join(' AND ')} ORDER BY id DESC LIMIT $${values.length}`, values };
}

/** A page's rows with their positions ([id, 0]); a value no row can hold matches none. */
export async function listRowsOf(pool: pg.Pool, plan: ListPlan, table: 'gov_audit_rows' | 'gov_replica_rows'): Promise<ListedRow[]> {
  if (!storable(plan.agentId) || !storable(plan.source)) return [];
  const res = await pool.query<{ id: string; seq: string; row_bytes: Buffer }>(listStatement(plan, table));
  return res.rows.map((r) => ({ row: readAuditRow(r.row_bytes, Number(r.seq)), position: [Number(r.id), 0] as const }));
}

/** Rows per read of a verify walk (~3 MB at 1.5 KB a row). */
export const VERIFY_PAGE_ROWS = 2000;

/** A stored row with the columns copied from its header (gov_audit_rows, gov_replica_rows). */
export interface StoredRowColumns {
  source: string;
  seq: string;
  envelope_id: string;
  phase: string;
  agent_id: string;
  decision: string;
  parent_envelope_id: string | null;
  ts_ms: string;
  row_bytes: Buffer;
}

/**
 * One source chain's walk: the shared ChainWalker checks each row's bytes, link, hashes, commitment and
 * seq; then the row's indexed columns must equal its hashed header, so a row re-labelled for the filters
 * (or moved to another source) is reported at its seq like an altered row.
 */
export class SourceWalk {
  private readonly walker: ChainWalker;
  private broken: SourceChainCheck | null = null;

  constructor(
    readonly source: string,
    payloadKey: Buffer | undefined,
    expectedHead: { seq: number; hash: string },
  ) {
    this.walker = new ChainWalker({ payloadKey, expectedHead });
  }

  /** false once the chain is broken: the rest of it need not be read. */
  step(r: StoredRowColumns): boolean {
    if (this.broken) return false;
    const seq = Number(r.seq);
    if (!this.walker.step(seq, r.row_bytes)) return false;
    const h = readAuditRow(r.row_bytes, seq);
    const matches =
      (h.source === null || h.source === r.source) && h.envelope_id === r.envelope_id && h.phase === r.phase &&
      h.agent_id === r.agent_id && h.decision === r.decision && h.parent_envelope_id === r.parent_envelope_id &&
      Date.parse(h.timestamp) === Number(r.ts_ms);
    if (matches) return true;
    const sofar = this.walker.finish();
    this.broken = { source: this.source, valid: false, rows_checked: sofar.rows_checked, first_invalid_seq: seq, head_hash: seq === 1 ? null : h.prev_hash };
    return false;
  }

  finish(): SourceChainCheck {
    return this.broken ?? { source: this.source, ...this.walker.finish() };
  }
}

