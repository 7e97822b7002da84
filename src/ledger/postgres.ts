import pg from 'pg';
import type { AuditListQuery, AuditRow, AuditRowWithPayload, ChainVerifyResponse, SourceChainCheck } from '../contracts/audit.js';
import { addExecution, copyStats, countsAsActivity, countsAsExecution, emptyStats, touch } from './agent-stats.js';
import { listOwn, type ListPlan } from './audit-query.js';
import { UNSAFE_STRING } from '../contracts/json-data.js';
import { CommitWaiters } from './commit-waiters.js';
import { LedgerConflictError, LedgerInputError, LedgerIntegrityError, LedgerUnavailableError } from './errors.js';
import { checkKvKey } from './kv-key.js';
import { assertPayloadKey, keyFingerprint } from './payload-cipher.js';
import {
  DEFAULT_MAX_PENDING_ROWS,
  type AgentStats,
  type AppendEntry,
  type KvStore,
  type Ledger,
  type ListedRow,
  type ListPage,
  type Storage,
  type StorageOptions,
  type VerifyOptions,
} from './port.js';
import { migrate } from './postgres-migrations.js';
import { PostgresReplicaStore } from './postgres-replicas.js';
import { listRowsOf, SourceWalk, storable, VERIFY_PAGE_ROWS, type StoredRowColumns } from './postgres-rows.js';
import { unreachable } from './postgres-unreachable.js';
import { RowBuilder, validateEntry, type BuiltRow } from './row-builder.js';
import { readAuditRow, readRowWithPayload } from './row-reader.js';
import { checkSourceId, defaultSourceId } from './source-id.js';

/** PostgreSQL-only options beside the port's StorageOptions. */
export interface PostgresStorageOptions extends StorageOptions {
  /** Apply pending migrations (migrations/*.sql) before opening; default true. */
  migrate?: boolean;
  /** Connections in the pool (default 10): the writer uses one at a time, reads the rest. */
  poolSize?: number;
  /** A pooled connection failed while idle (the database restarted, the network dropped); default: ignored. */
  onError?: (err: Error) => void;
}

/**
 * Group-commit bounds: one statement takes every append queued while the previous batch committed. Larger
 * batches cost one statement each, so the caps only keep a burst from building one huge transaction.
 */
const MAX_BATCH_ROWS = 2000;
const MAX_BATCH_BYTES = 16 << 20;
/** Attempts of one batch against conflicts with other sources' concurrent batches (a unique violation). */
const MAX_RETRIES = 8;
/** Agents per read of agents(), as LMDB pages them. */
const AGENT_PAGE = 512;
/** PostgreSQL's timestamptz holds years 4713 BC to 294276 AD; rows keep to the years ISO 8601 writes plainly. */
const MIN_TIMESTAMP_MS = Date.parse('0001-01-01T00:00:00Z');
const MAX_TIMESTAMP_MS = Date.parse('9999-12-31T23:59:59.999Z');

/** The failing statement reports the error; the event is only observed. */
const ignoreError = (): void => undefined;

/** A row appended but not yet acknowledged. */
interface PendingRow {
  entry: AppendEntry;
  built: BuiltRow;
  tsMs: number;
  postCheckParent: string | null;
  activity: boolean;
  execution: boolean;
  resolve: (row: AuditRow) => void;
  reject: (err: unknown) => void;
}

type AppendResult =
  | { status: 'ok' }
  | { status: 'moved'; seq: string | number; hash: string | null }
  | { status: 'conflict'; envelopes: string[]; post_checks: Record<string, string> }
  | { status: 'retry' };

const APPEND_SQL = 'SELECT gov_append_rows($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) AS r';

/** stats and the writer's own head in one statement, hence one snapshot (see pendingSince). */
const STATS_SQL = `SELECT (SELECT row_to_json(s) FROM gov_agent_stats s WHERE s.agent_id = $1) AS stats,
  (SELECT seq FROM gov_source_heads WHERE source = $2) AS head_seq`;
const AGENTS_SQL = `SELECT a.agent_id, a.executions, a.outcomes, a.last_activity,
  (SELECT seq FROM gov_source_heads WHERE source = $3) AS head_seq
  FROM gov_agent_stats a WHERE $1::text IS NULL OR a.agent_id > $1 ORDER BY a.agent_id LIMIT $2`;

interface StoredStats {
  executions: string | number;
  outcomes: Record<string, number>;
  last_activity: string | null;
}

function statsFromDb(s: StoredStats | null | undefined): AgentStats {
  if (!s) return emptyStats();
  return { executions: Number(s.executions), outcomes: { ...s.outcomes } as AgentStats['outcomes'], last_activity: s.last_activity ?? null };
}

/**
 * The central store's ledger: one chain per source in gov_audit_rows (migrations/0001_init.sql), this
 * process writing its own source's chain. Rows are built as the LMDB ledger builds them (RowBuilder, on the
 * head this process last saw) and committed in batches: while one batch's statement runs, appends queue up
 * and go together in the next, each batch one call of gov_append_rows, which commits before it answers.
 * That function locks the source's head row, so two processes that write one source (a misconfiguration)
 * serialize: the second finds the head moved, rebuilds its rows on it and tries again, and the chain never
 * forks. docs/ledger.md, "PostgreSQL".
 */
class PostgresLedger implements Ledger {
  private readonly builder: RowBuilder;
  /** The source's head as last confirmed by the database. */
  private committedHead: { seq: number; hash: string | null };
  private queue: PendingRow[] = [];
  private writing = false;
  private scheduled = false;
  private closing = false;
  private closed: Promise<void> | null = null;
  /** Rows appended and not yet settled, by envelope id; get() waits on them. */
  private readonly inFlight = new Map<string, PendingRow>();
  private readonly waiters: CommitWaiters;
  /** pre-check envelope id → post_check envelope id of rows not yet settled. */
  private readonly inFlightPostChecks = new Map<string, string>();
  /** This process's activity rows that reads of the stored counters may not see yet (agentStats adds them). */
  private readonly unsettled = new UnsettledActivity();
  private readonly verifying = new Set<Promise<unknown>>();
  /** Stats reads on the way, by agent id: calls for the same agent share one (agentStats). */
  private readonly statsReads = new Map<string, Promise<{ stats: StoredStats | null; headSeq: number }>>();
  private readonly flushNow = () => {
    this.scheduled = false;
    this.flush();
  };

  constructor(
    private readonly pool: pg.Pool,
    private readonly source: string,
    private readonly payloadKey: Buffer | undefined,
    head: { seq: number; hash: string | null },
    maxPendingRows: number,
  ) {
    this.builder = new RowBuilder(head, payloadKey, source);
    this.committedHead = head;
    this.waiters = new CommitWaiters({ pending: () => this.inFlight.size, busy: () => this.writing || this.queue.length > 0, closing: () => this.closing }, maxPendingRows);
  }

  async head(): Promise<{ seq: number; hash: string | null }> {
    return this.builder.head();
  }

  pendingRows(): number {
    return this.inFlight.size;
  }

  room(): Promise<void> | null {
    return this.waiters.whenRoom();
  }

  append(entry: AppendEntry): Promise<AuditRow> {
    if (this.closing) return Promise.reject(new LedgerUnavailableError('ledger is closed'));
    let built: BuiltRow;
    let tsMs: number;
    try {
      validateEntry(entry);
      tsMs = Date.parse(entry.timestamp);
      if (tsMs < MIN_TIMESTAMP_MS || tsMs > MAX_TIMESTAMP_MS) throw new LedgerInputError('timestamp must lie in the years 0001 to 9999');
      // The header holds any string (JSON escapes it); the indexed columns must hold the same one.
      if (!storable(entry.envelope_id) || !storable(entry.agent_id) || !storable(entry.parent_envelope_id)) {
        throw new LedgerInputError('envelope_id, agent_id and parent_envelope_id must not contain NUL or lone surrogates');
      }
      const id = entry.envelope_id;
      if (this.inFlight.has(id)) throw new LedgerConflictError('duplicate_envelope_id', `envelope ${id} is already in the ledger`, id);
      const parent = entry.phase === 'post_check' ? entry.parent_envelope_id : null;
      const existing = parent === null ? undefined : this.inFlightPostChecks.get(parent);
      if (existing !== undefined) {
        throw new LedgerConflictError('post_check_exists', `pre-check ${parent} already has post-check ${existing}`, existing);
      }
      built = this.builder.build(entry, true);
    } catch (err) {
      return Promise.reject(err);
    }
    let resolve!: (row: AuditRow) => void;
    let reject!: (err: unknown) => void;
    const promise = new Promise<AuditRow>((res, rej) => {
      resolve = res;
      reject = rej;
    });
    const p: PendingRow = {
      entry,
      built,
      tsMs,
      postCheckParent: entry.phase === 'post_check' ? entry.parent_envelope_id : null,
      activity: countsAsActivity(entry.phase),
      execution: countsAsExecution(entry.phase),
      resolve,
      reject,
    };
    this.inFlight.set(entry.envelope_id, p);
    if (p.postCheckParent !== null) this.inFlightPostChecks.set(p.postCheckParent, entry.envelope_id);
    if (p.activity) this.unsettled.add(p);
    this.queue.push(p);
    // Appends made in this task join one batch; later ones queue behind the batch being written.
    if (!this.writing && !this.scheduled) {
      this.scheduled = true;
      queueMicrotask(this.flushNow);
    }
    return promise;
  }

  private flush(): void {
    if (this.writing || this.queue.length === 0) return;
    let count = 0;
    let bytes = 0;
    while (count < this.queue.length && count < MAX_BATCH_ROWS && bytes < MAX_BATCH_BYTES) {
      bytes += this.queue[count].built.bytes.length;
      count++;
    }
    const batch = this.queue.splice(0, count);
    this.writing = true;
    void this.commit(batch).then(
      () => {
        this.writing = false;
        if (this.queue.length > 0) this.flush();
        else this.waiters.notifyIfIdle();
      },
      (err: unknown) => {
        this.failBatch(batch, err);
        this.writing = false;
        this.waiters.notifyIfIdle();
      },
    );
  }

  /**
   * Commits a batch: one statement on the way that nearly always succeeds. When the head moved (another
   * writer of this source) the batch continues in a transaction that holds the head row's lock, so it
   * cannot be overtaken again; refused rows (conflicts) are rejected and the rest rebuilt and retried.
   */
  private async commit(batch: PendingRow[]): Promise<void> {
    let rows = batch;
    let client: pg.PoolClient | null = null;
    let release: ((err?: Error) => void) | null = null;
    try {
      for (let attempt = 0; ; attempt++) {
        const result = await this.call(client ?? this.pool, rows);
        if (result.status === 'ok') {
          if (client) await client.query('COMMIT');
          this.acknowledge(rows);
          return;
        }
        if (attempt >= MAX_RETRIES) throw new LedgerUnavailableError(`could not commit a batch of ${rows.length} rows after ${attempt + 1} attempts (${result.status})`);
        if (result.status === 'moved') {
          if (!client) {
            client = await this.pool.connect();
            // A checked-out client has no listener of the pool's: an error between statements must not end the process.
            client.on('error', ignoreError);
            const held = client;
            release = (err?: Error) => {
              held.off('error', ignoreError);
              held.release(err);
            };
            await client.query('BEGIN');
            const locked = await client.query<{ seq: string; hash: string | null }>('SELECT seq, hash FROM gov_source_heads WHERE source = $1 FOR UPDATE', [this.source]);
            const head = locked.rows[0] ? { seq: Number(locked.rows[0].seq), hash: locked.rows[0].hash } : { seq: 0, hash: null };
            rows = this.rebuild(rows, head);
          } else {
            rows = this.rebuild(rows, { seq: Number(result.seq), hash: result.hash });
          }
        } else if (result.status === 'conflict') {
          rows = this.refuseConflicts(rows, result.envelopes, result.post_checks);
        }
        if (rows.length === 0) {
          if (client) await client.query('COMMIT');
          return;
        }
      }
    } catch (err) {
      if (client) await client.query('ROLLBACK').catch(() => undefined);
      // A connection that failed mid-transaction goes, instead of back into the pool.
      release?.(err as Error);
      release = null;
      throw err;
    } finally {
      release?.();
    }
  }

  private async call(db: pg.Pool | pg.PoolClient, rows: PendingRow[]): Promise<AppendResult> {
    const n = rows.length;
    const envelopes = new Array<string>(n);
    const phases = new Array<string>(n);
    const agents = new Array<string>(n);
    const decisions = new Array<string>(n);
    const parents = new Array<string | null>(n);
    const tsMs = new Array<number>(n);
    const lengths = new Array<number>(n);
    const deltas = new Map<string, { agent_id: string; executions: number; outcomes: Record<string, number>; last_activity: string | null; last_ms: number | null }>();
    let total = 0;
    for (let i = 0; i < n; i++) {
      const p = rows[i];
      const e = p.entry;
      envelopes[i] = e.envelope_id;
      phases[i] = e.phase;
      agents[i] = e.agent_id;
      decisions[i] = e.decision;
      parents[i] = e.parent_envelope_id;
      tsMs[i] = p.tsMs;
      lengths[i] = p.built.bytes.length;
      total += lengths[i];
      if (!p.activity) continue;
      let d = deltas.get(e.agent_id);
      if (!d) deltas.set(e.agent_id, (d = { agent_id: e.agent_id, executions: 0, outcomes: {}, last_activity: null, last_ms: null }));
      if (p.execution) {
        d.executions++;
        d.outcomes[e.decision] = (d.outcomes[e.decision] ?? 0) + 1;
      }
      if (d.last_ms === null || p.tsMs > d.last_ms) {
        d.last_ms = p.tsMs;
        d.last_activity = e.timestamp;
      }
    }
    const blob = Buffer.allocUnsafe(total);
    let at = 0;
    for (const p of rows) at += p.built.bytes.copy(blob, at);
    const first = rows[0].built;
    const last = rows[n - 1].built;
    const res = await db.query<{ r: AppendResult }>({
      name: 'gov_append_rows',
      text: APPEND_SQL,
      values: [
        // The head before the batch: seq 0 has no hash (GENESIS_HASH is only row 1's prev_hash).
        this.source, first.seq - 1, first.seq === 1 ? null : first.row.prev_hash, last.row.hash,
        envelopes, phases, agents, decisions, parents, tsMs, lengths, blob, JSON.stringify([...deltas.values()]),
      ],
    });
    return res.rows[0].r;
  }

  /** Rebuilds `rows` and everything queued behind them on `head`, in order; a row that no longer builds is refused. */
  private rebuild(rows: PendingRow[], head: { seq: number; hash: string | null }): PendingRow[] {
    this.builder.reset(head);
    const keep: PendingRow[] = [];
    const queued: PendingRow[] = [];
    for (const [list, out] of [[rows, keep], [this.queue, queued]] as const) {
      for (const p of list) {
        try {
          p.built = this.builder.build(p.entry, true);
          out.push(p);
        } catch (err) {
          this.settleOne(p, err);
        }
      }
    }
    this.queue = queued;
    return keep;
  }

  /** Rejects the rows the database refused and rebuilds the rest (and the queue) from the batch's start. */
  private refuseConflicts(rows: PendingRow[], envelopes: string[], postChecks: Record<string, string>): PendingRow[] {
    const dup = new Set(envelopes);
    const start = { seq: rows[0].built.seq - 1, hash: rows[0].built.seq === 1 ? null : rows[0].built.row.prev_hash };
    const rest: PendingRow[] = [];
    for (const p of rows) {
      const id = p.entry.envelope_id;
      if (dup.has(id)) {
        this.settleOne(p, new LedgerConflictError('duplicate_envelope_id', `envelope ${id} is already in the ledger`, id));
      } else if (p.postCheckParent !== null && postChecks[p.postCheckParent] !== undefined) {
        const existing = postChecks[p.postCheckParent];
        this.settleOne(p, new LedgerConflictError('post_check_exists', `pre-check ${p.postCheckParent} already has post-check ${existing}`, existing));
      } else {
        rest.push(p);
      }
    }
    return this.rebuild(rest, start);
  }

  private forget(p: PendingRow): void {
    const id = p.entry.envelope_id;
    if (this.inFlight.get(id) === p) this.inFlight.delete(id);
    if (p.postCheckParent !== null && this.inFlightPostChecks.get(p.postCheckParent) === id) this.inFlightPostChecks.delete(p.postCheckParent);
    this.waiters.settled(id);
  }

  private settleOne(p: PendingRow, err: unknown): void {
    this.forget(p);
    if (p.activity) this.unsettled.drop(p);
    p.reject(err);
  }

  private acknowledge(rows: PendingRow[]): void {
    const last = rows[rows.length - 1].built;
    this.committedHead = { seq: last.seq, hash: last.row.hash };
    this.unsettled.committed(rows);
    for (const p of rows) {
      this.forget(p);
      p.resolve(p.built.row);
    }
    this.waiters.wakeRoom();
  }

  /**
   * A batch that failed (the database unreachable, a statement error) takes every queued row with it: they
   * chain through rows that may not be stored. The builder returns to the last confirmed head; if the
   * failed statement did commit after all, the next batch finds the head moved and rebuilds on it.
   */
  private failBatch(batch: PendingRow[], cause: unknown): void {
    const rest = this.queue;
    this.queue = [];
    const error = cause instanceof LedgerUnavailableError ? cause : new LedgerUnavailableError('ledger commit failed', { cause });
    for (const p of [...batch, ...rest]) {
      if (this.inFlight.get(p.entry.envelope_id) === p) this.settleOne(p, error);
    }
    this.builder.reset(this.committedHead);
    this.waiters.wakeRoom();
  }

  async get(envelopeId: string): Promise<AuditRowWithPayload | null> {
    if (!storable(envelopeId)) return null;
    if (this.inFlight.has(envelopeId)) await this.waiters.whenSettled(envelopeId);
    const res = await this.pool.query<{ seq: string; row_bytes: Buffer }>({
      name: 'gov_get_row',
      text: 'SELECT seq, row_bytes FROM gov_audit_rows WHERE envelope_id = $1',
      values: [envelopeId],
    });
    if (res.rows.length === 0) return null;
    const seq = Number(res.rows[0].seq);
    const row = readRowWithPayload(res.rows[0].row_bytes, this.payloadKey, seq);
    if (row.seq !== seq || row.envelope_id !== envelopeId) throw new LedgerIntegrityError(`row at seq ${seq} is not envelope ${envelopeId}`, seq);
    return row;
  }

  /**
   * Newest first across every source of gov_audit_rows (arrival order, the `id` column); `next_cursor` is
   * the last item's id, so paging never repeats or skips a row while others arrive.
   */
  list(query: AuditListQuery): Promise<ListPage> {
    return listOwn(this, query);
  }

  listRows(plan: ListPlan): Promise<ListedRow[]> {
    return listRowsOf(this.pool, plan, 'gov_audit_rows');
  }

  async postCheckOf(preCheckEnvelopeId: string): Promise<string | null> {
    const pending = this.inFlightPostChecks.get(preCheckEnvelopeId);
    if (pending !== undefined) return pending;
    if (!storable(preCheckEnvelopeId)) return null;
    const res = await this.pool.query<{ envelope_id: string }>({
      name: 'gov_post_check_of',
      text: `SELECT envelope_id FROM gov_audit_rows WHERE phase = 'post_check' AND parent_envelope_id = $1`,
      values: [preCheckEnvelopeId],
    });
    return res.rows[0]?.envelope_id ?? null;
  }

  /**
   * The gateway reads an agent's stats on every validate. Calls for one agent that arrive while a read of it
   * is on the way share that read: what it cannot have seen of this process's rows, UnsettledActivity adds,
   * so a shared read misses only other replicas' rows committed meanwhile (a few milliseconds' worth). Under
   * load that is one read per agent at a time instead of one per call.
   */
  async agentStats(agentId: string): Promise<AgentStats> {
    if (!storable(agentId)) return emptyStats();
    let read = this.statsReads.get(agentId);
    if (read === undefined) {
      const sent = this.unsettled.beginRead();
      const started = this.pool
        .query<{ stats: StoredStats | null; head_seq: string | null }>({ name: 'gov_agent_stats', text: STATS_SQL, values: [agentId, this.source] })
        .then((res) => ({ stats: res.rows[0].stats, headSeq: Number(res.rows[0].head_seq ?? 0) }));
      read = started;
      this.statsReads.set(agentId, started);
      const done = () => {
        if (this.statsReads.get(agentId) === started) this.statsReads.delete(agentId);
        // After every caller sharing the read has added the unsettled rows (their continuations are microtasks).
        setImmediate(() => this.unsettled.endRead(sent));
      };
      started.then(done, done);
    }
    const { stats, headSeq } = await read;
    return this.unsettled.addTo(agentId, headSeq, statsFromDb(stats));
  }

  async *agents(after?: string): AsyncIterable<[string, AgentStats]> {
    // A cursor PostgreSQL cannot take as text: from its well-formed part, which orders the same up to there.
    let cursor = after === undefined ? null : storable(after) ? after : after.replace(new RegExp(UNSAFE_STRING.source, 'g'), '');
    for (;;) {
      const sent = this.unsettled.beginRead();
      let items: Array<[string, AgentStats]>;
      let more: boolean;
      let bound: string | null;
      try {
        const res = await this.pool.query<StoredStats & { agent_id: string; head_seq: string | null }>({
          name: 'gov_agents_page',
          text: AGENTS_SQL,
          values: [cursor, AGENT_PAGE, this.source],
        });
        const stored = res.rows;
        const headSeq = stored.length > 0 ? Number(stored[0].head_seq ?? 0) : await this.ownHeadSeq();
        more = stored.length === AGENT_PAGE;
        bound = more ? stored[stored.length - 1].agent_id : null;
        // Agents whose only rows are unsettled, between the cursor and this page's last stored agent.
        const from = cursor;
        const unsettledOnly = this.unsettled
          .agentIds()
          .filter((id) => (from === null || id > from) && (bound === null || id <= bound))
          .sort();
        items = [];
        let i = 0;
        const addUnsettledOnly = (id: string) => {
          const stats = this.unsettled.addTo(id, headSeq, emptyStats());
          if (stats.last_activity !== null) items.push([id, stats]);
        };
        for (const s of stored) {
          while (i < unsettledOnly.length && unsettledOnly[i] < s.agent_id) addUnsettledOnly(unsettledOnly[i++]);
          if (i < unsettledOnly.length && unsettledOnly[i] === s.agent_id) i++;
          items.push([s.agent_id, this.unsettled.addTo(s.agent_id, headSeq, statsFromDb(s))]);
        }
        for (; i < unsettledOnly.length; i++) addUnsettledOnly(unsettledOnly[i]);
      } finally {
        this.unsettled.endRead(sent);
      }
      for (const item of items) yield [item[0], copyStats(item[1])];
      if (!more) return;
      cursor = bound;
    }
  }

  private async ownHeadSeq(): Promise<number> {
    const res = await this.pool.query<{ seq: string }>('SELECT seq FROM gov_source_heads WHERE source = $1', [this.source]);
    return Number(res.rows[0]?.seq ?? 0);
  }

  verify(options?: VerifyOptions): Promise<ChainVerifyResponse> {
    if (this.closing) return Promise.reject(new LedgerUnavailableError('ledger is closed'));
    const run = this.verifySnapshot(options?.bySource === true);
    this.verifying.add(run);
    const forget = () => this.verifying.delete(run);
    run.then(forget, forget);
    return run;
  }

  /**
   * Walks every source chain in one REPEATABLE READ snapshot, so each chain is compared with the head
   * record committed with it. Each row goes through the shared ChainWalker (bytes, links, hashes,
   * commitments, seq); then its indexed columns must equal its hashed header, so a row moved to another
   * source or re-labelled for the filters is reported at its seq too.
   */
  private async verifySnapshot(bySource: boolean): Promise<ChainVerifyResponse> {
    const client = await this.pool.connect();
    client.on('error', ignoreError);
    try {
      await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
      const heads = new Map<string, { seq: number; hash: string }>();
      for (const h of (await client.query<{ source: string; seq: string; hash: string | null }>('SELECT source, seq, hash FROM gov_source_heads')).rows) {
        heads.set(h.source, { seq: Number(h.seq), hash: h.hash ?? '' });
      }
      const checks: SourceChainCheck[] = [];
      let walk: SourceWalk | null = null;
      let after: { source: string; seq: string } | null = null;
      for (;;) {
        const page: pg.QueryResult<StoredRowColumns> = await client.query<StoredRowColumns>(
          `SELECT source, seq, envelope_id, phase, agent_id, decision, parent_envelope_id,
                  round(extract(epoch FROM ts) * 1000)::bigint AS ts_ms, row_bytes
             FROM gov_audit_rows ${after ? 'WHERE (source, seq) > ($2, $3::bigint)' : ''}
            ORDER BY source, seq LIMIT $1`,
          after ? [VERIFY_PAGE_ROWS, after.source, after.seq] : [VERIFY_PAGE_ROWS],
        );
        for (const r of page.rows) {
          if (walk === null || walk.source !== r.source) {
            if (walk) checks.push(walk.finish());
            walk = new SourceWalk(r.source, this.payloadKey, heads.get(r.source) ?? { seq: 0, hash: '' });
            heads.delete(r.source);
          }
          walk.step(r);
        }
        if (page.rows.length < VERIFY_PAGE_ROWS) break;
        const last: StoredRowColumns = page.rows[page.rows.length - 1];
        after = { source: last.source, seq: last.seq };
      }
      if (walk) checks.push(walk.finish());
      // A head record without rows: the whole chain is gone (or was never written, at seq 0).
      for (const [source, head] of heads) checks.push(new SourceWalk(source, this.payloadKey, head).finish());
      await client.query('COMMIT');
      checks.sort((a, b) => (a.source < b.source ? -1 : a.source > b.source ? 1 : 0));
      return summarize(checks, this.source, bySource);
    } catch (err) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw new LedgerUnavailableError('verify could not read the store', { cause: err });
    } finally {
      client.off('error', ignoreError);
      client.release();
    }
  }

  /**
   * Drops a row's payload and salt through gov_erase_payload, the one UPDATE the append-only trigger lets
   * through (migrations/0001_init.sql). false for an unknown envelope id.
   */
  async erasePayload(envelopeId: string): Promise<boolean> {
    if (this.closing) throw new LedgerUnavailableError('ledger is closed');
    if (!storable(envelopeId)) return false;
    if (this.inFlight.has(envelopeId)) await this.waiters.whenSettled(envelopeId);
    const res = await this.pool.query<{ erased: boolean }>('SELECT gov_erase_payload($1) AS erased', [envelopeId]);
    return res.rows[0].erased;
  }

  close(): Promise<void> {
    if (!this.closed) {
      this.closing = true;
      this.waiters.wakeRoom();
      this.closed = this.waiters.whenIdle().then(async () => {
        await Promise.allSettled([...this.verifying]);
      });
    }
    return this.closed;
  }
}

/**
 * This process's rows that count as an agent's activity and that a read of the stored counters may not
 * include. A read returns the counters with this source's head in one snapshot, so exactly this process's
 * rows above that head are missing from it: the rows still committing, and rows whose batch committed after
 * the snapshot but was acknowledged here before the read's answer arrived (the two answers come on
 * different connections). The latter are kept until every read sent before their acknowledgement has
 * finished, so neither kind is lost or counted twice.
 */
class UnsettledActivity {
  private readonly byAgent = new Map<string, Set<PendingRow>>();
  /** Batches acknowledged so far. */
  private epoch = 0;
  /** Reads on the way, by the epoch they were sent in. */
  private readonly reads = new Map<number, number>();
  /** Acknowledged rows kept for reads sent before they were acknowledged. */
  private retained: Array<{ row: PendingRow; epoch: number }> = [];

  add(p: PendingRow): void {
    let set = this.byAgent.get(p.entry.agent_id);
    if (!set) this.byAgent.set(p.entry.agent_id, (set = new Set()));
    set.add(p);
  }

  /** A row refused or failed: gone at once. */
  drop(p: PendingRow): void {
    const set = this.byAgent.get(p.entry.agent_id);
    if (!set) return;
    set.delete(p);
    if (set.size === 0) this.byAgent.delete(p.entry.agent_id);
  }

  committed(rows: PendingRow[]): void {
    this.epoch++;
    for (const p of rows) {
      if (!p.activity) continue;
      if (this.reads.size === 0) this.drop(p);
      else this.retained.push({ row: p, epoch: this.epoch });
    }
  }

  beginRead(): number {
    this.reads.set(this.epoch, (this.reads.get(this.epoch) ?? 0) + 1);
    return this.epoch;
  }

  endRead(sent: number): void {
    const n = (this.reads.get(sent) ?? 1) - 1;
    if (n > 0) this.reads.set(sent, n);
    else this.reads.delete(sent);
    if (this.retained.length === 0) return;
    // A row acknowledged in epoch e is needed by reads sent before e only.
    let oldest = Infinity;
    for (const e of this.reads.keys()) if (e < oldest) oldest = e;
    const keep: Array<{ row: PendingRow; epoch: number }> = [];
    for (const r of this.retained) {
      if (r.epoch > oldest) keep.push(r);
      else this.drop(r.row);
    }
    this.retained = keep;
  }

  agentIds(): string[] {
    return [...this.byAgent.keys()];
  }

  /** Adds the agent's rows above `headSeq` (the snapshot's head of this source) to `into`. */
  addTo(agentId: string, headSeq: number, into: AgentStats): AgentStats {
    const set = this.byAgent.get(agentId);
    if (!set) return into;
    for (const p of set) {
      if (p.built.seq <= headSeq) continue;
      if (p.execution) addExecution(into, p.entry.decision);
      touch(into, p.entry.timestamp);
    }
    return into;
  }
}

/** The fleet-wide result: every chain valid, or the first invalid one's seq; the own source's head otherwise. */
function summarize(checks: SourceChainCheck[], own: string, bySource: boolean): ChainVerifyResponse {
  const invalid = checks.find((c) => !c.valid);
  const mine = checks.find((c) => c.source === own);
  const out: ChainVerifyResponse = {
    valid: invalid === undefined,
    rows_checked: checks.reduce((n, c) => n + c.rows_checked, 0),
    first_invalid_seq: invalid ? invalid.first_invalid_seq : null,
    head_hash: invalid ? invalid.head_hash : (mine?.head_hash ?? null),
  };
  if (bySource) out.sources = checks;
  return out;
}

/** Values kept as JSON text, so get() returns a fresh copy, as the other adapters do. */
class PostgresKv implements KvStore {
  /** Writes not yet committed, so a get() right after put() sees the new value. */
  private readonly pending = new Map<string, { ns: string; key: string; json: string | undefined }>();

  constructor(private readonly pool: pg.Pool) {}

  private static id(ns: string, key: string): string {
    return ns + '\u0000' + key;
  }

  async get<T = unknown>(ns: string, key: string): Promise<T | undefined> {
    if (!storable(ns) || !storable(key)) return undefined;
    const p = this.pending.get(PostgresKv.id(ns, key));
    let json: string | undefined;
    if (p) json = p.json;
    else {
      const res = await this.pool.query<{ value: string }>({ name: 'gov_kv_get', text: 'SELECT value FROM gov_kv WHERE ns = $1 AND key = $2', values: [ns, key] });
      json = res.rows[0]?.value;
    }
    return json === undefined ? undefined : (JSON.parse(json) as T);
  }

  async put(ns: string, key: string, value: unknown): Promise<void> {
    checkKvKey(ns, key);
    if (!storable(ns) || !storable(key)) throw new TypeError('kv namespace and key must not contain lone surrogates');
    const json = value === undefined ? undefined : JSON.stringify(value);
    const id = PostgresKv.id(ns, key);
    const entry = { ns, key, json };
    this.pending.set(id, entry);
    try {
      if (json === undefined) await this.pool.query('DELETE FROM gov_kv WHERE ns = $1 AND key = $2', [ns, key]);
      else {
        await this.pool.query(
          'INSERT INTO gov_kv (ns, key, value) VALUES ($1, $2, $3) ON CONFLICT (ns, key) DO UPDATE SET value = EXCLUDED.value, updated_at = now()',
          [ns, key, json],
        );
      }
    } finally {
      if (this.pending.get(id) === entry) this.pending.delete(id);
    }
  }

  async entries<T = unknown>(ns: string): Promise<Array<[string, T]>> {
    if (!storable(ns)) return [];
    const merged = new Map<string, string | undefined>();
    const res = await this.pool.query<{ key: string; value: string }>({ name: 'gov_kv_entries', text: 'SELECT key, value FROM gov_kv WHERE ns = $1', values: [ns] });
    for (const r of res.rows) merged.set(r.key, r.value);
    for (const p of this.pending.values()) if (p.ns === ns) merged.set(p.key, p.json);
    const out: Array<[string, T]> = [];
    for (const [k, json] of merged) if (json !== undefined) out.push([k, JSON.parse(json) as T]);
    return out.sort((a, b) => Buffer.compare(Buffer.from(a[0]), Buffer.from(b[0])));
  }
}

/** The encryption key must be the one the store's payloads were written with (as the LMDB ledger checks). */
async function checkKeyFingerprint(pool: pg.Pool, payloadKey: Buffer | undefined): Promise<void> {
  const res = await pool.query<{ value: string }>(`SELECT value FROM gov_meta WHERE key = 'key_fingerprint'`);
  const stored = res.rows[0]?.value;
  if (payloadKey !== undefined) {
    const mine = keyFingerprint(payloadKey);
    if (stored === undefined) {
      await pool.query(`INSERT INTO gov_meta (key, value) VALUES ('key_fingerprint', $1) ON CONFLICT (key) DO NOTHING`, [mine]);
      const again = await pool.query<{ value: string }>(`SELECT value FROM gov_meta WHERE key = 'key_fingerprint'`);
      if (again.rows[0]?.value !== mine) throw new Error('the audit encryption key does not match the key the store was written with');
    } else if (stored !== mine) {
      throw new Error('the audit encryption key does not match the key the store was written with');
    }
  } else if (stored !== undefined) {
    throw new Error('the store holds encrypted payloads: set the audit encryption key (GOV_AUDIT_ENCRYPTION_KEY) to open it');
  }
}

/**
 * The pool as the adapters use it, with a lost server reported as LedgerUnavailableError: every route
 * answers 503 with Retry-After while the database is unreachable, never a 500 (the append path already
 * reports its failures so; this covers the reads and the kv store).
 */
function reportingUnavailable(pool: pg.Pool): pg.Pool {
  const rethrow = (e: unknown): never => {
    throw unreachable(e) ? new LedgerUnavailableError('the database is unreachable', { cause: e }) : e;
  };
  return new Proxy(pool, {
    get(target, prop) {
      if (prop === 'query') return (...args: Parameters<pg.Pool['query']>) => (target.query as (...a: unknown[]) => Promise<unknown>)(...args).catch(rethrow);
      if (prop === 'connect') return () => target.connect().catch(rethrow);
      const value: unknown = Reflect.get(target, prop, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

/** A failed SET only leaves the server's default plan choice: the connection is still handed out. */
async function setPlanCacheMode(client: pg.ClientBase): Promise<void> {
  await client.query('SET plan_cache_mode = force_custom_plan').catch(() => undefined);
}

/**
 * Opens the central audit store at `url` (a postgres:// connection string): migrates it unless told not
 * to, checks the encryption key, and continues this process's source chain from its stored head.
 */
export async function openPostgresStorage(url: string, opts: PostgresStorageOptions = {}): Promise<Storage> {
  const payloadKey = opts.encryptionKey;
  if (payloadKey !== undefined) assertPayloadKey(payloadKey);
  const source = checkSourceId(opts.source ?? defaultSourceId('ledger'));
  if (opts.migrate ?? true) await migrate(url);
  const poolSize = opts.poolSize ?? 10;
  const pool = new pg.Pool({
    connectionString: url,
    max: poolSize,
    application_name: 'gov-gateway',
    keepAlive: true,
    connectionTimeoutMillis: 10_000,
    onConnect: setPlanCacheMode,
  });
  // Plan every statement for the tables as they are now. A session (pooled for the process's life) otherwise
  // keeps a generic plan made while the tables were empty: on a fresh store the duplicate-envelope check of
  // every batch stayed a sequential scan of gov_audit_rows (measured: about half the validate throughput of
  // a store that had rows when the gateway started; docs/performance.md). Planning these statements costs
  // microseconds. A SET, not a startup option, which PgBouncer would refuse; gov_append_rows sets it for
  // itself too, for a pooler that does not keep sessions. The pool runs it (onConnect, setPlanCacheMode)
  // before it hands the new connection out, so no statement is queued behind it on the client, which pg
  // deprecates.
  const onError = opts.onError ?? (() => undefined);
  pool.on('error', (err) => onError(err));
  try {
    await checkKeyFingerprint(pool, payloadKey);
    const res = await pool.query<{ seq: string; hash: string | null }>('SELECT seq, hash FROM gov_source_heads WHERE source = $1', [source]);
    const head = res.rows[0] ? { seq: Number(res.rows[0].seq), hash: res.rows[0].hash } : { seq: 0, hash: null };
    const guarded = reportingUnavailable(pool);
    const ledger = new PostgresLedger(guarded, source, payloadKey, head, Math.max(1, opts.maxPendingRows ?? DEFAULT_MAX_PENDING_ROWS));
    let closing: Promise<void> | null = null;
    return {
      ledger,
      kv: new PostgresKv(guarded),
      // Replicated batches may hold half the pool at most; the gateway's own appends and reads keep the rest.
      replicas: new PostgresReplicaStore(guarded, payloadKey, Math.max(1, Math.ceil(poolSize / 2))),
      close() {
        closing ??= (async () => {
          await ledger.close();
          await pool.end();
        })();
        return closing;
      },
    };
  } catch (err) {
    await pool.end().catch(() => undefined);
    throw err;
  }
}
