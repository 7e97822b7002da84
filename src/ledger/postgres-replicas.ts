import type pg from 'pg';
import type { AuditRowWithPayload } from '../contracts/audit.js';
import type { ListPlan } from './audit-query.js';
import { LedgerError, LedgerIntegrityError, LedgerUnavailableError } from './errors.js';
import type { IngestResult, ListedRow, ReplicaStore, SourceHead, SourceVerifyResult, StoredRow } from './port.js';
import { listRowsOf, SourceWalk, storable, VERIFY_PAGE_ROWS, type StoredRowColumns } from './postgres-rows.js';
import { readRowWithPayload } from './row-reader.js';
import { unreachable } from './postgres-unreachable.js';
import { planIngest, type IngestPlan } from './replica-batch.js';
import { storedRowHash } from './row-format.js';


/**
 * Locks the source's head row for the transaction, creating it at seq 0 for a new source, and returns it:
 * ON CONFLICT DO UPDATE takes the row lock as SELECT ... FOR UPDATE would, in one round trip.
 */
const LOCK_HEAD_SQL = `INSERT INTO gov_replica_heads AS h (source, seq, hash) VALUES ($1, 0, NULL)
  ON CONFLICT (source) DO UPDATE SET source = h.source RETURNING seq, hash`;

/**
 * The fresh rows of a plan, back to back in one bytea ($4, sent in binary) cut by their lengths ($5), as
 * gov_append_rows takes a batch. ON CONFLICT DO NOTHING: an envelope id the source already stored under
 * another seq is not an error that aborts the transaction but a row missing from the count, which the
 * plan then names (ingestIn).
 */
const INSERT_ROWS_SQL = `INSERT INTO gov_replica_rows (source, seq, envelope_id, row_bytes, phase, agent_id, decision, parent_envelope_id, ts)
  SELECT $1, $2::bigint + r.i, r.envelope_id, substring($4::bytea FROM (r.ends - r.len + 1)::integer FOR r.len),
         r.phase, r.agent_id, r.decision, r.parent, to_timestamp(r.ts_ms / 1000.0)
    FROM (SELECT u.*, sum(u.len) OVER (ORDER BY u.i) AS ends
            FROM unnest($3::text[], $5::integer[], $6::text[], $7::text[], $8::text[], $9::text[], $10::bigint[])
                 WITH ORDINALITY AS u(envelope_id, len, phase, agent_id, decision, parent, ts_ms, i)) AS r
   ORDER BY r.i
  ON CONFLICT DO NOTHING`;

const ignoreError = (): void => undefined;

/**
 * Replicated source chains in the central PostgreSQL store (migrations/0002_replica_chains.sql), beside
 * the gateway replicas' own chains in gov_audit_rows, as the LMDB store keeps them beside its ledger.
 *
 * A batch is one transaction: lock the source's head row, plan the batch against it with the shared
 * planIngest (replica-batch.ts: chain, links, commitments, duplicates, conflicts), insert the fresh rows,
 * move the head, commit; ingest() resolves only after COMMIT. The head row's lock is what makes ingest
 * exactly-once across processes: a retry racing its original, or two gateway replicas given batches of one
 * source, wait for each other, and the later one plans against the head the earlier one committed, so its
 * rows count as duplicates. Batches of different sources take different locks and run side by side.
 */
export class PostgresReplicaStore implements ReplicaStore {
  private active = 0;
  private readonly waiting: Array<() => void> = [];

  /**
   * `maxConcurrent`: batches in their transaction at once, each holding a pooled connection. The pool is the
   * gateway's own too (its ledger writer, counter reads, kv), so many sidecars shipping at once must leave
   * it room: more batches wait here, in arrival order, and their senders wait for the answer (backpressure).
   */
  constructor(
    private readonly pool: pg.Pool,
    private readonly payloadKey: Buffer | undefined,
    private readonly maxConcurrent: number,
  ) {}

  private async slot(): Promise<void> {
    if (this.active < this.maxConcurrent) {
      this.active++;
      return;
    }
    // The finishing batch hands its slot over (free), so `active` stays as it is.
    await new Promise<void>((resolve) => this.waiting.push(resolve));
  }

  private free(): void {
    const next = this.waiting.shift();
    if (next) next();
    else this.active--;
  }

  async head(source: string): Promise<SourceHead> {
    const res = await this.query<{ seq: string; hash: string | null }>('SELECT seq, hash FROM gov_replica_heads WHERE source = $1', [source]);
    const h = res.rows[0];
    return h && Number(h.seq) > 0 ? { seq: Number(h.seq), hash: h.hash } : { seq: 0, hash: null };
  }

  async ingest(source: string, rows: StoredRow[]): Promise<IngestResult> {
    if (rows.length === 0) return { source, stored: 0, duplicates: 0, head: await this.head(source) };
    await this.slot();
    try {
      return await this.ingestBatch(source, rows);
    } finally {
      this.free();
    }
  }

  private async ingestBatch(source: string, rows: StoredRow[]): Promise<IngestResult> {
    const client = await this.connect();
    let failure: Error | undefined;
    try {
      await client.query('BEGIN');
      const plan = await this.ingestIn(client, source, rows);
      await client.query('COMMIT');
      return { source, stored: plan.fresh.length, duplicates: plan.duplicates, head: plan.head };
    } catch (err) {
      await client.query('ROLLBACK').catch(ignoreError);
      if (err instanceof LedgerError) throw err;
      // A connection that failed mid-transaction is closed instead of going back to the pool.
      failure = err as Error;
      throw availability(err, 'the central store could not take the batch');
    } finally {
      client.off('error', ignoreError);
      client.release(failure);
    }
  }

  /** Plans and writes one batch inside the caller's transaction; throws IngestRejectedError to refuse it. */
  private async ingestIn(client: pg.PoolClient, source: string, rows: StoredRow[]): Promise<IngestPlan> {
    const locked = (await client.query<{ seq: string; hash: string | null }>(LOCK_HEAD_SQL, [source])).rows[0];
    const head: SourceHead = { seq: Number(locked.seq), hash: locked.hash };
    // Rows of the batch at or below the head must be the stored ones: read those (a re-sent batch only).
    const first = rows[0].seq;
    const stored = new Map<number, string | null>();
    if (Number.isSafeInteger(first) && first <= head.seq) {
      const res = await client.query<{ seq: string; row_bytes: Buffer }>(
        'SELECT seq, row_bytes FROM gov_replica_rows WHERE source = $1 AND seq BETWEEN $2 AND $3',
        [source, first, Math.min(head.seq, first + rows.length - 1)],
      );
      for (const r of res.rows) stored.set(Number(r.seq), storedRowHash(r.row_bytes));
    }
    const known = new Map<string, number>();
    const lookup = { hashAt: (seq: number) => stored.get(seq) ?? null, seqOfEnvelope: (id: string) => known.get(id) ?? null };
    const plan = planIngest(source, rows, head, lookup, this.payloadKey);
    if (plan.fresh.length === 0) return plan;

    const f = plan.fresh;
    const inserted = await client.query(INSERT_ROWS_SQL, [
      source, head.seq, f.map((r) => r.envelopeId), Buffer.concat(f.map((r) => r.bytes)), f.map((r) => r.bytes.length),
      f.map((r) => r.phase), f.map((r) => r.agentId), f.map((r) => r.decision), f.map((r) => r.parentEnvelopeId), f.map((r) => r.tsMs),
    ]);
    if (inserted.rowCount !== plan.fresh.length) {
      // Some envelope id is stored already under an earlier seq of this source: the plan names the row.
      const res = await client.query<{ envelope_id: string; seq: string }>(
        'SELECT envelope_id, seq FROM gov_replica_rows WHERE source = $1 AND envelope_id = ANY ($2) AND seq <= $3',
        [source, plan.fresh.map((r) => r.envelopeId), head.seq],
      );
      for (const r of res.rows) known.set(r.envelope_id, Number(r.seq));
      planIngest(source, rows, head, lookup, this.payloadKey);
      throw new LedgerUnavailableError(`source ${source}: ${plan.fresh.length - (inserted.rowCount ?? 0)} rows of the batch were not stored and no stored envelope explains it`);
    }
    await client.query('UPDATE gov_replica_heads SET seq = $2, hash = $3, updated_at = now() WHERE source = $1', [source, plan.head.seq, plan.head.hash]);
    return plan;
  }

  async readRows(source: string, afterSeq: number, limit: number): Promise<StoredRow[]> {
    const res = await this.query<{ seq: string; row_bytes: Buffer }>(
      'SELECT seq, row_bytes FROM gov_replica_rows WHERE source = $1 AND seq > $2 ORDER BY seq LIMIT $3',
      [source, afterSeq, limit],
    );
    return res.rows.map((r) => ({ seq: Number(r.seq), bytes: r.row_bytes }));
  }

  listRows(plan: ListPlan): Promise<ListedRow[]> {
    return listRowsOf(this.pool, plan, 'gov_replica_rows');
  }

  async get(envelopeId: string): Promise<AuditRowWithPayload | null> {
    if (!storable(envelopeId)) return null;
    const res = await this.query<{ source: string; seq: string; row_bytes: Buffer }>(
      'SELECT source, seq, row_bytes FROM gov_replica_rows WHERE envelope_id = $1 ORDER BY id LIMIT 1',
      [envelopeId],
    );
    const r = res.rows[0];
    if (r === undefined) return null;
    const row = readRowWithPayload(r.row_bytes, this.payloadKey, Number(r.seq));
    if (row.envelope_id !== envelopeId) throw new LedgerIntegrityError(`replicated row ${r.seq} of source ${r.source} is not envelope ${envelopeId}`, Number(r.seq));
    return row;
  }

  /**
   * Every source chain in one REPEATABLE READ snapshot, each compared with the head committed with its
   * rows, walked by the ChainWalker Ledger.verify() uses (SourceWalk: then each row's listing columns must
   * equal its hashed header); a head whose rows are all gone is reported too.
   */
  async verify(): Promise<SourceVerifyResult[]> {
    const client = await this.connect();
    try {
      await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
      const heads = (await client.query<{ source: string; seq: string; hash: string | null }>(
        'SELECT source, seq, hash FROM gov_replica_heads WHERE seq > 0 ORDER BY source',
      )).rows;
      const out: SourceVerifyResult[] = [];
      for (const h of heads) {
        const walk = new SourceWalk(h.source, this.payloadKey, { seq: Number(h.seq), hash: h.hash ?? '' });
        let after = 0;
        for (;;) {
          const page = await client.query<StoredRowColumns>(
            `SELECT source, seq, envelope_id, phase, agent_id, decision, parent_envelope_id,
                    round(extract(epoch FROM ts) * 1000)::bigint AS ts_ms, row_bytes
               FROM gov_replica_rows WHERE source = $1 AND seq > $2 ORDER BY seq LIMIT $3`,
            [h.source, after, VERIFY_PAGE_ROWS],
          );
          let ok = true;
          for (const r of page.rows) if (!(ok = walk.step(r))) break;
          if (!ok || page.rows.length < VERIFY_PAGE_ROWS) break;
          after = Number(page.rows[page.rows.length - 1].seq);
        }
        out.push(walk.finish());
      }
      await client.query('COMMIT');
      return out;
    } catch (err) {
      await client.query('ROLLBACK').catch(ignoreError);
      throw availability(err, 'verify could not read the replicated chains');
    } finally {
      client.off('error', ignoreError);
      client.release();
    }
  }

  /**
   * A pooled connection whose failure between statements is reported by the failing statement only. The
   * pool is the store's guarded one (postgres.ts): an unreachable server rejects with LedgerUnavailableError.
   */
  private async connect(): Promise<pg.PoolClient> {
    const client = await this.pool.connect();
    client.on('error', ignoreError);
    return client;
  }

  private query<R extends pg.QueryResultRow>(sql: string, values: unknown[]): Promise<pg.QueryResult<R>> {
    return this.pool.query<R>(sql, values);
  }
}

/** A lost server mid-transaction as LedgerUnavailableError (503, retried by the shipper); other errors as they are. */
function availability(err: unknown, message: string): unknown {
  return unreachable(err) ? new LedgerUnavailableError(message, { cause: err }) : err;
}
